//! Random appends and purges against a model: a queue of records per rseg.

use std::collections::{HashSet, VecDeque};

use proptest::prelude::*;

use super::tests::{append, undo_engine};
use super::*;

#[derive(Clone, Debug)]
enum Op {
    /// Append to `rseg` a record whose commit is the next one less `back`
    /// (roughly in commit order), with a key and an old value of these
    /// lengths (`None`: absent).
    Append {
        rseg: usize,
        first: bool,
        back: u64,
        key: usize,
        old: Option<usize>,
    },
    /// Purge `rseg` below the next commit less `back`, at most `max`.
    Purge { rseg: usize, back: u64, max: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize, any::<bool>(), 0..5u64, 0..256usize, prop::option::of(0..1024usize))
            .prop_map(|(rseg, first, back, key, old)| Op::Append { rseg, first, back, key, old }),
        1 => (0..3usize, 0..40u64, 1..200usize)
            .prop_map(|(rseg, back, max)| Op::Purge { rseg, back, max }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn appends_and_purges_match_a_queue_per_rseg(ops in prop::collection::vec(op(), 1..300)) {
        let (e, us) = undo_engine(4096);
        let mut model: Vec<VecDeque<(RollPtr, OwnedUndo)>> = vec![VecDeque::new(); N_RSEGS];
        let mut commit = 100u64;
        for op in ops {
            match op {
                Op::Append { rseg, first, back, key, old } => {
                    commit += 1;
                    let r = OwnedUndo {
                        first,
                        del_mark: key % 2 == 1,
                        commit: commit - back,
                        root: rseg as u32,
                        key: vec![commit as u8; key],
                        old: old.map(|n| vec![key as u8; n]),
                        delta: old.is_some_and(|n| n >= DELTA_HEADER) && key.is_multiple_of(3),
                    };
                    let p = append(&e, &us, rseg, &r.as_record());
                    model[rseg].push_back((p, r));
                }
                Op::Purge { rseg, back, max } => {
                    let limit = commit - back;
                    let mut got = Vec::new();
                    let step = us
                        .purge(&e, rseg, limit, max, &mut |r| {
                            got.push(r.clone());
                            Ok(())
                        })
                        .unwrap();
                    let mut want = Vec::new();
                    let q = &mut model[rseg];
                    while want.len() < max && q.front().is_some_and(|(_, r)| r.commit < limit) {
                        want.extend(q.pop_front().map(|(_, r)| r));
                    }
                    prop_assert_eq!(&got, &want);
                    prop_assert_eq!(step.records, want.len() as u64);
                    let blocked = q.front().map(|(_, r)| r.commit).filter(|&c| c >= limit);
                    if want.len() < max {
                        prop_assert_eq!(step.blocked_at, blocked);
                    }
                }
            }
            let firsts: u64 = model.iter().flatten().map(|(_, r)| u64::from(r.first)).sum();
            prop_assert_eq!(us.history_len(), firsts);
        }
        let c = us.check(&e).unwrap();
        let live: HashSet<u64> = model.iter().flatten().map(|(p, _)| p.raw()).collect();
        prop_assert_eq!(&c.live, &live);
        prop_assert_eq!(c.pages, us.pages());
        for (p, r) in model.iter().flatten() {
            prop_assert_eq!(&us.read(&e, *p).unwrap(), r);
        }
        // Everything purged: one empty page left per rseg that had one.
        for rseg in 0..N_RSEGS {
            us.purge(&e, rseg, u64::MAX, usize::MAX, &mut |_| Ok(())).unwrap();
        }
        let c = us.check(&e).unwrap();
        prop_assert_eq!((c.unpurged, us.history_len()), (0, 0));
        prop_assert_eq!(c.pages, c.tails.iter().filter(|&&t| t != 0).count() as u64);
    }
}
