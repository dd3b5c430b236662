#![allow(clippy::unwrap_used)]
//! Model test of multi-version reads: 2 to 4 transactions driven from one
//! thread in random interleavings (begin at a random level, get, scan,
//! scan_rev, get_for_update, put, delete, commit, rollback), mixed with
//! autocommit `Table::put`/`delete`/`get`/`range`, checked against a model
//! of snapshot isolation: every key keeps its committed versions with the
//! commit's sequence number.
//!
//! - A plain read sees the committed versions up to its view, with the
//!   transaction's own writes overlaid. REPEATABLE READ: the view is the
//!   sequence at the transaction's first plain read; READ COMMITTED: at the
//!   start of each call. A scan keeps the view of its start even when a
//!   commit lands while it is half read (steps with `mid`).
//! - `get_for_update`, `put`, `delete` act on the latest committed version
//!   (own writes overlaid): `delete` returns whether the key exists there.
//!   They take the row lock; a key locked by another open transaction is
//!   refused (`SelfDeadlock` here, since every transaction lives on this
//!   thread; `LockWaitTimeout` accepted too: `lock_wait_timeout` is 5 ms),
//!   and the model predicts exactly when.
//! - Outside transactions, `Table::get`/`range` read the latest commit.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use keel::{Db, Error, Isolation, Options, Table, Txn};
use proptest::prelude::*;

const KEYS: u8 = 6;

#[derive(Clone, Debug)]
enum Step {
    Begin(usize, bool),
    Get(usize, u8),
    /// A scan of `lo..hi` (whole table if lo >= hi), reverse or not; `mid`:
    /// after `n` rows, an autocommit put of `key`, then the rest.
    Scan {
        slot: usize,
        lo: u8,
        hi: u8,
        rev: bool,
        mid: Option<(u8, u8)>,
    },
    ForUpdate(usize, u8),
    Put(usize, u8),
    Delete(usize, u8),
    Commit(usize),
    Rollback(usize),
    AutoPut(u8),
    AutoDelete(u8),
    AutoGet(u8),
    /// `Table::range`, with an optional autocommit put in the middle.
    AutoRange {
        lo: u8,
        hi: u8,
        rev: bool,
        mid: Option<(u8, u8)>,
    },
}

fn step(slots: usize) -> impl Strategy<Value = Step> {
    let s = 0..slots;
    let k = 0..KEYS;
    let mid = proptest::option::of((0u8..4, 0..KEYS));
    prop_oneof![
        4 => (s.clone(), any::<bool>()).prop_map(|(s, rr)| Step::Begin(s, rr)),
        5 => (s.clone(), k.clone()).prop_map(|(s, k)| Step::Get(s, k)),
        3 => (s.clone(), 0..=KEYS, 0..=KEYS, any::<bool>(), mid.clone())
            .prop_map(|(slot, lo, hi, rev, mid)| Step::Scan { slot, lo, hi, rev, mid }),
        2 => (s.clone(), k.clone()).prop_map(|(s, k)| Step::ForUpdate(s, k)),
        5 => (s.clone(), k.clone()).prop_map(|(s, k)| Step::Put(s, k)),
        2 => (s.clone(), k.clone()).prop_map(|(s, k)| Step::Delete(s, k)),
        3 => s.clone().prop_map(Step::Commit),
        1 => s.prop_map(Step::Rollback),
        3 => k.clone().prop_map(Step::AutoPut),
        1 => k.clone().prop_map(Step::AutoDelete),
        1 => k.prop_map(Step::AutoGet),
        1 => (0..=KEYS, 0..=KEYS, any::<bool>(), mid)
            .prop_map(|(lo, hi, rev, mid)| Step::AutoRange { lo, hi, rev, mid }),
    ]
}

fn case() -> impl Strategy<Value = (usize, Vec<Step>)> {
    (2usize..=4).prop_flat_map(|n| (Just(n), proptest::collection::vec(step(n), 1..=40)))
}

fn key(k: u8) -> Vec<u8> {
    format!("k{k}").into_bytes()
}

type Val = Option<String>;
type Rows = Vec<(String, String)>;

struct MTxn {
    real: Txn,
    rr: bool,
    /// REPEATABLE READ's view, once its first plain read took it.
    view: Option<u64>,
    writes: BTreeMap<u8, Val>,
    locks: BTreeSet<u8>,
}

struct Model {
    /// Sequence number of the last commit.
    seq: u64,
    /// key → (commit sequence, value) ascending.
    versions: BTreeMap<u8, Vec<(u64, Val)>>,
    txns: Vec<Option<MTxn>>,
}

impl Model {
    fn at(&self, k: u8, view: u64) -> Val {
        let vs = self.versions.get(&k)?;
        vs.iter().rev().find(|(s, _)| *s <= view)?.1.clone()
    }

    fn commit(&mut self, writes: impl IntoIterator<Item = (u8, Val)>) {
        self.seq += 1;
        for (k, v) in writes {
            self.versions.entry(k).or_default().push((self.seq, v));
        }
    }

    /// The open transaction other than `me` holding `k`'s lock: its id.
    fn holder(&self, k: u8, me: Option<usize>) -> Option<u64> {
        self.txns.iter().enumerate().find_map(|(i, t)| match t {
            Some(t) if Some(i) != me && t.locks.contains(&k) => Some(t.real.id()),
            _ => None,
        })
    }

    /// The view of a plain read by `slot` starting now (None: no txn).
    fn read_view(&mut self, slot: Option<usize>) -> u64 {
        let seq = self.seq;
        match slot.and_then(|s| self.txns[s].as_mut()) {
            Some(t) if t.rr => *t.view.get_or_insert(seq),
            _ => seq,
        }
    }

    /// What `slot` (or no transaction) sees of `k` at `view`.
    fn visible(&self, slot: Option<usize>, k: u8, view: u64) -> Val {
        if let Some(t) = slot.and_then(|s| self.txns[s].as_ref()) {
            if let Some(v) = t.writes.get(&k) {
                return v.clone();
            }
        }
        self.at(k, view)
    }

    fn rows(&self, slot: Option<usize>, view: u64, lo: u8, hi: u8, rev: bool) -> Rows {
        let keys = if lo < hi { lo..hi } else { 0..KEYS };
        let mut r: Rows = keys
            .filter_map(|k| {
                let v = self.visible(slot, k, view)?;
                Some((String::from_utf8(key(k)).unwrap(), v))
            })
            .collect();
        if rev {
            r.reverse();
        }
        r
    }
}

fn text(v: Option<Vec<u8>>) -> Val {
    v.map(|v| String::from_utf8(v).unwrap())
}

fn collect(it: impl Iterator<Item = keel::Result<(Vec<u8>, Vec<u8>)>>) -> Rows {
    it.map(|r| {
        let (k, v) = r.unwrap();
        (String::from_utf8(k).unwrap(), String::from_utf8(v).unwrap())
    })
    .collect()
}

/// Up to `n` rows (all with `None`) through the lending `Scan::next_row`.
fn collect_lent(it: &mut keel::Scan<'_>, n: Option<usize>) -> Rows {
    let mut rows = Rows::new();
    while n.is_none_or(|n| rows.len() < n) {
        let Some(r) = it.next_row() else { break };
        let (k, v) = r.unwrap();
        rows.push((
            String::from_utf8(k.to_vec()).unwrap(),
            String::from_utf8(v.to_vec()).unwrap(),
        ));
    }
    rows
}

fn bounds(lo: u8, hi: u8) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    if lo < hi {
        (Bound::Included(key(lo)), Bound::Excluded(key(hi)))
    } else {
        (Bound::Unbounded, Bound::Unbounded)
    }
}

fn as_ref(b: &(Bound<Vec<u8>>, Bound<Vec<u8>>)) -> (Bound<&[u8]>, Bound<&[u8]>) {
    (
        b.0.as_ref().map(Vec::as_slice),
        b.1.as_ref().map(Vec::as_slice),
    )
}

/// A lock request that the model says conflicts with `owner`.
fn assert_refused<T: std::fmt::Debug>(r: keel::Result<T>, owner: u64, what: &str) {
    match r {
        Err(Error::SelfDeadlock { owner: o, .. }) => assert_eq!(o, owner, "{what}"),
        Err(Error::LockWaitTimeout { .. }) => {}
        r => panic!("{what}: the row is locked by txn {owner}; expected a refusal, got {r:?}"),
    }
}

/// An autocommit put of `k` (value `v`), as the model predicts it.
fn auto_put(m: &mut Model, t: &Table, k: u8, v: String, what: &str) {
    let r = t.put(&key(k), v.as_bytes());
    match m.holder(k, None) {
        Some(owner) => assert_refused(r, owner, what),
        None => {
            let existed = m.at(k, m.seq).is_some();
            assert_eq!(r.unwrap(), existed, "{what}: replaced?");
            m.commit([(k, Some(v))]);
        }
    }
}

fn run(slots: usize, steps: Vec<Step>) {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        lock_wait_timeout: 0.005,
        ..common::small_opts(64)
    };
    let db = Db::open(dir.path(), opts).unwrap();
    let t = db.create_table("t").unwrap();
    let mut m = Model {
        seq: 0,
        versions: BTreeMap::new(),
        txns: (0..slots).map(|_| None).collect(),
    };
    for (n, st) in steps.into_iter().enumerate() {
        let what = format!("step {n}: {st:?}");
        let v = format!("v{n}");
        let open = |s: usize| m.txns[s].is_some();
        match st {
            Step::Begin(s, rr) if !open(s) => {
                let level = if rr {
                    Isolation::RepeatableRead
                } else {
                    Isolation::ReadCommitted
                };
                let real = db.begin_with(level);
                assert_eq!(real.isolation(), level);
                m.txns[s] = Some(MTxn {
                    real,
                    rr,
                    view: None,
                    writes: BTreeMap::new(),
                    locks: BTreeSet::new(),
                });
            }
            Step::Get(s, k) if open(s) => {
                let view = m.read_view(Some(s));
                let got = text(m.txns[s].as_ref().unwrap().real.get(&t, &key(k)).unwrap());
                assert_eq!(got, m.visible(Some(s), k, view), "{what}");
            }
            Step::Scan {
                slot,
                lo,
                hi,
                rev,
                mid,
            } if open(slot) => {
                let view = m.read_view(Some(slot));
                let want = m.rows(Some(slot), view, lo, hi, rev);
                let b = bounds(lo, hi);
                let tx = &m.txns[slot].as_ref().unwrap().real;
                let mut it = if rev {
                    tx.scan_rev(&t, as_ref(&b)).unwrap()
                } else {
                    tx.scan(&t, as_ref(&b)).unwrap()
                };
                // Half the scans lend their rows (`next_row`), half copy
                // them (the iterator).
                let lent = (lo ^ hi) & 1 == 1;
                let first = mid.map_or(0, |(n, _)| usize::from(n));
                let mut got = if lent {
                    collect_lent(&mut it, Some(first))
                } else {
                    collect(it.by_ref().take(first))
                };
                let rest = |it: &mut keel::Scan<'_>| {
                    if lent {
                        collect_lent(it, None)
                    } else {
                        collect(it.by_ref())
                    }
                };
                if let Some((_, k)) = mid {
                    // The put cannot wait for `tx`: it is this thread's.
                    let r = t.put(&key(k), v.as_bytes());
                    got.extend(rest(&mut it));
                    match m.holder(k, None) {
                        Some(owner) => assert_refused(r, owner, &what),
                        None => {
                            r.unwrap();
                            m.commit([(k, Some(v))]);
                        }
                    }
                } else {
                    got.extend(rest(&mut it));
                }
                assert_eq!(got, want, "{what}");
            }
            Step::ForUpdate(s, k) | Step::Put(s, k) | Step::Delete(s, k) if open(s) => {
                let tx = &mut m.txns[s].as_mut().unwrap().real;
                let r = match st {
                    Step::ForUpdate(..) => tx.get_for_update(&t, &key(k)).map(text),
                    Step::Put(..) => tx.put(&t, &key(k), v.as_bytes()).map(|()| None),
                    _ => tx
                        .delete(&t, &key(k))
                        .map(|e| e.then(|| "existed".to_string())),
                };
                if let Some(owner) = m.holder(k, Some(s)) {
                    assert_refused(r, owner, &what);
                    continue;
                }
                let latest = m.visible(Some(s), k, m.seq);
                let got = r.unwrap();
                let mt = m.txns[s].as_mut().unwrap();
                mt.locks.insert(k);
                match st {
                    Step::ForUpdate(..) => assert_eq!(got, latest, "{what}: latest"),
                    Step::Put(..) => {
                        mt.writes.insert(k, Some(v));
                    }
                    _ => {
                        assert_eq!(got.is_some(), latest.is_some(), "{what}: existed?");
                        mt.writes.insert(k, None);
                    }
                }
            }
            Step::Commit(s) if open(s) => {
                let mt = m.txns[s].take().unwrap();
                mt.real.commit().unwrap();
                if !mt.writes.is_empty() {
                    m.commit(mt.writes);
                }
            }
            Step::Rollback(s) if open(s) => m.txns[s].take().unwrap().real.rollback(),
            Step::AutoPut(k) => auto_put(&mut m, &t, k, v, &what),
            Step::AutoDelete(k) => {
                let r = t.delete(&key(k));
                match m.holder(k, None) {
                    Some(owner) => assert_refused(r, owner, &what),
                    None => {
                        assert_eq!(r.unwrap(), m.at(k, m.seq).is_some(), "{what}");
                        m.commit([(k, None)]);
                    }
                }
            }
            Step::AutoGet(k) => {
                assert_eq!(text(t.get(&key(k)).unwrap()), m.at(k, m.seq), "{what}");
            }
            Step::AutoRange { lo, hi, rev, mid } => {
                let want = m.rows(None, m.seq, lo, hi, rev);
                let b = bounds(lo, hi);
                let mut it = if rev {
                    t.range_rev(as_ref(&b)).unwrap()
                } else {
                    t.range(as_ref(&b)).unwrap()
                };
                let mut got = collect(it.by_ref().take(mid.map_or(0, |(n, _)| n.into())));
                if let Some((_, k)) = mid {
                    auto_put(&mut m, &t, k, v, &what);
                }
                got.extend(collect(it));
                assert_eq!(got, want, "{what}");
            }
            _ => {} // a transaction step on an empty slot, or a begin on a full one
        }
    }
    for mt in m.txns.iter_mut().filter_map(Option::take) {
        mt.real.rollback();
    }
    let end = m.rows(None, m.seq, 0, 0, false);
    assert_eq!(
        collect(t.range(..).unwrap()),
        end,
        "committed state at the end"
    );
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        max_shrink_iters: 4096,
        ..ProptestConfig::default()
    })]
    #[test]
    fn reads_match_the_snapshot_model((slots, steps) in case()) {
        run(slots, steps);
    }
}
