//! Node layout: unit tests, model-based round trips, corruption detection.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::buf::NodeBuf;
use super::node::*;
use crate::error::Error;
use crate::page::{init_page, put_u16, PageId, PageType};

fn leaf_page(ps: usize) -> Vec<u8> {
    let mut p = vec![0u8; ps];
    init_page(&mut p, PageId::new(1, 9), PageType::BtreeLeaf);
    NodeMut::init(&mut p, 0, 0);
    p
}

fn internal_page(ps: usize, leftmost: u32) -> Vec<u8> {
    let mut p = vec![0u8; ps];
    init_page(&mut p, PageId::new(1, 9), PageType::BtreeInternal);
    NodeMut::init(&mut p, 1, leftmost);
    p
}

fn put(p: &mut [u8], k: &[u8], v: &[u8]) -> bool {
    let mut n = NodeMut::new(p);
    match n.as_ref().search(k) {
        Ok(i) => n.replace_cell(i, &leaf_cell(k, v)),
        Err(i) => n.insert_cell(i, &leaf_cell(k, v)),
    }
}

fn contents(p: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let n = NodeRef::new(p);
    (0..n.n_cells())
        .map(|i| (n.key(i).to_vec(), n.value(i).to_vec()))
        .collect()
}

fn corruption(p: &[u8]) -> String {
    match check(p) {
        Err(Error::Corruption(m)) => m,
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn empty_node_is_valid_for_every_page_size() {
    for ps in [4096, 8192, 16384, 32768, 65536] {
        let p = leaf_page(ps);
        check(&p).unwrap();
        let n = NodeRef::new(&p);
        assert_eq!((n.n_cells(), n.level(), n.used_bytes()), (0, 0, 0));
        assert_eq!(n.free_bytes(), usable_bytes(ps));
        assert_eq!(n.content_start(), ps);
    }
}

#[test]
fn insert_search_remove_keep_order() {
    let mut p = leaf_page(4096);
    for k in [b"m".as_ref(), b"a", b"z", b"", b"mm"] {
        assert!(put(&mut p, k, b"v"));
    }
    check(&p).unwrap();
    let keys: Vec<_> = contents(&p).into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, [&b""[..], b"a", b"m", b"mm", b"z"]);
    let n = NodeRef::new(&p);
    assert_eq!(n.search(b"m"), Ok(2));
    assert_eq!(n.search(b"b"), Err(2));
    NodeMut::new(&mut p).remove_cell(2);
    check(&p).unwrap();
    assert_eq!(NodeRef::new(&p).search(b"m"), Err(2));
}

#[test]
fn full_page_compacts_fragments_before_refusing() {
    let ps = 4096;
    let mut p = leaf_page(ps);
    let mut i = 0u32;
    while put(&mut p, &i.to_be_bytes(), &[7u8; 100]) {
        i += 1;
    }
    let n = NodeRef::new(&p).n_cells();
    assert!(NodeRef::new(&p).free_bytes() < 110);
    // Free every other cell: space is there but fragmented.
    for j in (0..n).step_by(2).rev() {
        NodeMut::new(&mut p).remove_cell(j);
    }
    check(&p).unwrap();
    assert!(NodeRef::new(&p).frag_bytes() > 0);
    assert!(put(&mut p, b"big", &[1u8; 1000]));
    check(&p).unwrap();
    assert_eq!(NodeRef::new(&p).frag_bytes(), 0);
}

#[test]
fn replace_grows_and_shrinks_in_place() {
    let mut p = leaf_page(4096);
    put(&mut p, b"k", b"short");
    put(&mut p, b"l", b"x");
    assert!(put(&mut p, b"k", &[9u8; 900]));
    check(&p).unwrap();
    assert!(put(&mut p, b"k", b"s"));
    check(&p).unwrap();
    assert_eq!(contents(&p)[0], (b"k".to_vec(), b"s".to_vec()));
    let free = NodeRef::new(&p).free_bytes();
    assert!(!put(&mut p, b"k", &[1u8; 5000][..free + 100]));
    assert_eq!(
        contents(&p)[0],
        (b"k".to_vec(), b"s".to_vec()),
        "failed replace changes nothing"
    );
}

#[test]
fn sixty_four_kib_empty_page_encodes_content_start() {
    let mut p = leaf_page(65536);
    assert!(put(&mut p, b"a", b"1"));
    NodeMut::new(&mut p).remove_cell(0);
    check(&p).unwrap();
    assert_eq!(NodeRef::new(&p).content_start(), 65536);
}

#[test]
fn internal_children_and_child_pos() {
    let mut p = internal_page(4096, 10);
    let mut n = NodeMut::new(&mut p);
    assert!(n.insert_cell(0, &internal_cell(b"g", 11)));
    assert!(n.insert_cell(1, &internal_cell(b"p", 12)));
    check(&p).unwrap();
    let r = NodeRef::new(&p);
    assert_eq!([r.child(0), r.child(1), r.child(2)], [10, 11, 12]);
    assert_eq!(r.child_pos(b"a"), 0);
    assert_eq!(r.child_pos(b"g"), 1);
    assert_eq!(r.child_pos(b"h"), 1);
    assert_eq!(r.child_pos(b"p"), 2);
    assert_eq!(r.child_pos(b"zz"), 2);
}

#[test]
fn limits_follow_the_page_size() {
    // Keys: InnoDB's rule, 3/16 of the page up to 3072 bytes.
    assert_eq!((max_key_len(4096), max_value_len(4096)), (768, 1024));
    assert_eq!(max_key_len(8192), 1536);
    assert_eq!(max_key_len(16384), 3072);
    assert_eq!(max_key_len(32768), 3072);
    assert_eq!((max_key_len(65536), max_value_len(65536)), (3072, 16384));
    assert!(check_entry(4096, &[0; 768], &[0; 1024]).is_ok());
    assert!(matches!(
        check_entry(4096, &[0; 769], b""),
        Err(Error::KeyTooLarge { len: 769, max: 768 })
    ));
    for ps in [8192, 16384, 32768, 65536] {
        let max = max_key_len(ps);
        assert!(check_key(ps, &vec![0; max]).is_ok());
        let err = check_key(ps, &vec![0; max + 1]).unwrap_err();
        assert!(
            matches!(err, Error::KeyTooLarge { len, max: m } if len == max + 1 && m == max),
            "{err}"
        );
        assert!(err.to_string().contains(&format!("maximum of {max} bytes")));
    }
    assert!(matches!(
        check_entry(4096, b"", &[0; 1025]),
        Err(Error::ValueTooLarge {
            len: 1025,
            max: 1024
        })
    ));
}

#[test]
fn shortest_separator_routes_both_neighbours() {
    assert_eq!(shortest_separator(b"abc", b"abd"), b"abd");
    assert_eq!(shortest_separator(b"abc", b"b"), b"b");
    assert_eq!(shortest_separator(b"apple", b"banana"), b"b");
    assert_eq!(shortest_separator(b"ab", b"abzz"), b"abz");
    assert_eq!(shortest_separator(b"", b"x"), b"x");
}

#[test]
fn split_point_balances_bytes_and_respects_fit() {
    assert_eq!(split_point(&[10, 10, 10, 10], 100, false), Some(2));
    assert_eq!(split_point(&[10, 10, 10, 10, 10], 100, true), Some(2));
    assert_eq!(split_point(&[90, 10, 10, 10], 100, false), Some(1));
    assert_eq!(split_point(&[60, 60], 50, false), None);
    assert_eq!(split_point(&[10, 10], 100, true), None);
}

#[test]
fn corruption_is_reported_precisely() {
    let mut good = leaf_page(4096);
    for k in [b"a", b"b", b"c"] {
        put(&mut good, k, b"value");
    }
    check(&good).unwrap();
    let slot = |i: usize| NODE_HEADER_END + 2 * i;

    let mut p = good.clone();
    put_u16(&mut p, slot(1), 10);
    assert!(corruption(&p).contains("outside the content area"));

    let mut p = good.clone();
    let off = crate::page::get_u16(&p, slot(0));
    put_u16(&mut p, slot(1), off);
    assert!(corruption(&p).contains("overlaps"));

    let mut p = good.clone();
    let (a, b) = (
        crate::page::get_u16(&p, slot(0)),
        crate::page::get_u16(&p, slot(1)),
    );
    put_u16(&mut p, slot(0), b);
    put_u16(&mut p, slot(1), a);
    assert!(corruption(&p).contains("not strictly ascending"));

    let mut p = good.clone();
    put_u16(&mut p, PAGE_HEADER_SIZE_FOR_TESTS + 4, 17);
    assert!(corruption(&p).contains("fragmented"));

    let mut p = good.clone();
    put_u16(&mut p, PAGE_HEADER_SIZE_FOR_TESTS, 3000);
    assert!(corruption(&p).contains("slot array"));

    let mut p = good.clone();
    put_u16(&mut p, PAGE_HEADER_SIZE_FOR_TESTS + 2, 5000);
    assert!(corruption(&p).contains("past the page end"));

    let mut p = good.clone();
    let last = crate::page::get_u16(&p, slot(2)) as usize;
    put_u16(&mut p, last + 2, 4000);
    assert!(corruption(&p).contains("past the page end"));

    let mut p = good.clone();
    p[PAGE_HEADER_SIZE_FOR_TESTS + 6] = 1;
    assert!(corruption(&p).contains("does not match level"));

    let p = internal_page(4096, 0);
    assert!(corruption(&p).contains("page 0"));
}

const PAGE_HEADER_SIZE_FOR_TESTS: usize = crate::page::PAGE_HEADER_SIZE;

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, usize),
    Remove(usize),
    Compact,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (proptest::collection::vec(0u8..4, 0..12), 0usize..1200).prop_map(|(k, v)| Op::Put(k, v)),
        2 => any::<usize>().prop_map(Op::Remove),
        1 => Just(Op::Compact),
    ]
}

proptest! {
    /// The key comparison's fast path orders keys exactly as bytes do,
    /// for keys shorter and longer than its eight bytes, and equal in
    /// their first eight.
    #[test]
    fn cmp_keys_orders_as_bytes(
        a in proptest::collection::vec(0u8..3, 0..14),
        b in proptest::collection::vec(0u8..3, 0..14),
        shared in proptest::collection::vec(any::<u8>(), 0..10),
    ) {
        prop_assert_eq!(cmp_keys(&a, &b), a.cmp(&b));
        let (x, y) = ([&shared[..], &a].concat(), [&shared[..], &b].concat());
        prop_assert_eq!(cmp_keys(&x, &y), x.cmp(&y));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random inserts, replaces and removes against a BTreeMap; a refused
    /// insert must be one that really does not fit.
    #[test]
    fn leaf_matches_model(ps in prop_oneof![Just(4096usize), Just(16384), Just(65536)],
                          ops in proptest::collection::vec(op(), 1..300)) {
        let mut p = leaf_page(ps);
        let mut model = BTreeMap::new();
        for op in ops {
            match op {
                Op::Put(k, vlen) => {
                    let v = vec![k.len() as u8; vlen.min(max_value_len(ps))];
                    let before = NodeRef::new(&p).free_bytes();
                    let old = model.get(&k).map(|o: &Vec<u8>| leaf_cell(&k, o).len()).unwrap_or(0);
                    let need = leaf_cell(&k, &v).len() + if old == 0 && !model.contains_key(&k) { SLOT_SIZE } else { 0 };
                    let ok = put(&mut p, &k, &v);
                    prop_assert_eq!(ok, before + old >= need);
                    if ok { model.insert(k, v); }
                }
                Op::Remove(i) if !model.is_empty() => {
                    let i = i % model.len();
                    let k = model.keys().nth(i).cloned().unwrap();
                    NodeMut::new(&mut p).remove_cell(i);
                    model.remove(&k);
                }
                Op::Remove(_) => {}
                Op::Compact => NodeMut::new(&mut p).compact(),
            }
            check(&p).unwrap();
            // The search's key reader agrees with the cell's own key.
            let n = NodeRef::new(&p);
            for i in 0..n.n_cells() {
                prop_assert_eq!(n.key(i), cell_key(n.cell(i), true));
            }
            // A scan's prefetch takes any index, in range or not, in either
            // direction, without a panic.
            for i in 0..n.n_cells() + 8 {
                n.prefetch_scan(i, i + 3);
                n.prefetch_scan(i.wrapping_sub(3), i.wrapping_sub(6));
                n.prefetch_scan(usize::MAX, i);
            }
            let used: usize = model.iter().map(|(k, v)| leaf_cell(k, v).len() + SLOT_SIZE).sum();
            prop_assert_eq!(NodeRef::new(&p).used_bytes(), used);
        }
        let want: Vec<_> = model.into_iter().collect();
        prop_assert_eq!(contents(&p), want);
    }

    /// Split then merge gives back the original cells, both halves fit, and
    /// the separator routes every key to its half.
    #[test]
    fn split_merge_round_trip(internal in any::<bool>(),
                              sizes in proptest::collection::vec((0usize..=max_key_len(4096), 0usize..1024), 8..40)) {
        let ps = 4096;
        let level = u8::from(internal);
        // Cells are added until the node overflows: a full page plus one cell,
        // the most any split has to handle.
        let mut node = NodeBuf { level, leftmost: 99, cells: Vec::new() };
        for (i, (kl, vl)) in sizes.iter().enumerate() {
            if !node.fits(ps) {
                break;
            }
            let mut k = (i as u32).to_be_bytes().to_vec();
            k.resize((*kl).max(4), b'k');
            node.cells.push(if internal { internal_cell(&k, i as u32 + 100) } else { leaf_cell(&k, &vec![1; *vl]) });
        }
        prop_assume!(!node.fits(ps));
        let (l, r, sep) = node.clone().split(ps).unwrap();
        prop_assert!(l.fits(ps) && r.fits(ps));
        prop_assert!(!l.cells.is_empty() && !r.cells.is_empty());
        prop_assert!(l.key(l.cells.len() - 1) < &sep[..]);
        prop_assert!(&sep[..] <= r.key(0));
        let back = NodeBuf::merge(l, &sep, r);
        prop_assert_eq!(back, node);
    }
}
