//! `validate` is exactly strong enough: every structurally valid node it
//! is shown passes, and on everything that passes no `NodeRef` accessor or
//! `NodeMut` method panics or leaves an invalid node.

use proptest::prelude::*;

use super::super::{internal_cell, leaf_cell, NodeMut, NODE_HEADER_END, SLOT_SIZE};
use super::*;
use crate::page::{init_page, put_u16, put_u32, PageId, PAGE_HEADER_SIZE};

const OFF_N_CELLS: usize = PAGE_HEADER_SIZE;
const OFF_CONTENT: usize = PAGE_HEADER_SIZE + 2;
const OFF_FRAG: usize = PAGE_HEADER_SIZE + 4;
const OFF_LEVEL: usize = PAGE_HEADER_SIZE + 6;

/// One cell of a generated node and the free bytes left below it.
#[derive(Debug, Clone)]
struct Placed {
    key: Vec<u8>,
    value_len: usize,
    child: u32,
    gap_below: usize,
}

fn placed() -> impl Strategy<Value = Placed> {
    (
        proptest::collection::vec(any::<u8>(), 0..24),
        0usize..80,
        any::<u32>(),
        prop_oneof![3 => Just(0usize), 1 => 1usize..40],
    )
        .prop_map(|(key, value_len, child, gap_below)| Placed {
            key,
            value_len,
            child,
            gap_below,
        })
}

/// A structurally valid node with everything the format allows and a tree
/// would never write: cells in any order on the page and in the slot array,
/// fragments anywhere, keys unsorted or equal, any level and any children.
fn arbitrary_valid_node() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![Just(4096usize), Just(8192), Just(65536)],
        prop_oneof![Just(0u8), 1u8..=255],
        proptest::collection::vec(placed(), 0..60),
        any::<u32>(),
        0usize..64,
        any::<u64>(),
    )
        .prop_map(|(ps, level, cells, leftmost, lead_gap, shuffle)| {
            let mut p = vec![0u8; ps];
            let t = if level == 0 {
                PageType::BtreeLeaf
            } else {
                PageType::BtreeInternal
            };
            init_page(&mut p, PageId::new(0, 5), t);
            p[OFF_LEVEL] = level;
            put_u32(&mut p, PAGE_HEADER_SIZE + 8, leftmost);
            // Lay the cells down from the page end, each above its gap.
            let mut top = ps;
            let mut offsets = Vec::new();
            for c in &cells {
                let bytes = if level == 0 {
                    leaf_cell(&c.key, &vec![7; c.value_len])
                } else {
                    internal_cell(&c.key, c.child)
                };
                let slot_end = NODE_HEADER_END + SLOT_SIZE * (offsets.len() + 1);
                let Some(at) = top.checked_sub(c.gap_below + bytes.len()) else {
                    break;
                };
                if at < slot_end + lead_gap {
                    break;
                }
                p[at..at + bytes.len()].copy_from_slice(&bytes);
                offsets.push((at, bytes.len()));
                top = at;
            }
            let start = if offsets.is_empty() {
                ps
            } else {
                top - lead_gap
            };
            let cell_bytes: usize = offsets.iter().map(|o| o.1).sum();
            // Slots in an order unrelated to the cells' places.
            let n = offsets.len();
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by_key(|&i| (i as u64).wrapping_mul(shuffle | 1).rotate_left(17));
            for (slot, &i) in order.iter().enumerate() {
                put_u16(
                    &mut p,
                    NODE_HEADER_END + SLOT_SIZE * slot,
                    offsets[i].0 as u16,
                );
            }
            put_u16(&mut p, OFF_N_CELLS, n as u16);
            put_u16(&mut p, OFF_CONTENT, (start & 0xffff) as u16);
            put_u16(&mut p, OFF_FRAG, (ps - start - cell_bytes) as u16);
            p
        })
}

fn script() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..90)
}

/// Overwrite `b` at random places, weighted to the fields validation reads:
/// the node header, the slot array and the first cell headers.
fn mutate(b: &mut [u8], edits: &[(u16, u8, bool)]) {
    for &(at, v, hot) in edits {
        let at = if hot {
            PAGE_HEADER_SIZE + usize::from(at) % 64
        } else {
            usize::from(at) % b.len()
        };
        b[at] = v;
    }
}

#[test]
fn empty_nodes_and_other_page_types_pass() {
    for ps in [4096usize, 65536] {
        for level in [0u8, 1, 200] {
            let mut p = vec![0u8; ps];
            init_page(&mut p, PageId::new(0, 3), PageType::BtreeLeaf);
            NodeMut::init(&mut p, level, 9);
            validate(&p).unwrap();
            exercise(&p, &[0, 0, 10, 0, 1, 20, 2, 0, 5, 3, 0, 0, 1, 0, 0]);
        }
    }
    let mut space = vec![0xabu8; 4096];
    init_page(&mut space, PageId::new(0, 0), PageType::SpaceHeader);
    space[40..].fill(0xab);
    validate(&space).unwrap();
}

#[test]
fn each_structural_fault_is_named() {
    let mut good = vec![0u8; 4096];
    init_page(&mut good, PageId::new(0, 3), PageType::BtreeLeaf);
    let mut n = NodeMut::init(&mut good, 0, 0);
    for k in [b"a", b"b", b"c"] {
        assert!(n.insert_cell(0, &leaf_cell(k, b"value")));
    }
    validate(&good).unwrap();
    let err = |spoil: &dyn Fn(&mut Vec<u8>)| {
        let mut p = good.clone();
        spoil(&mut p);
        validate(&p).unwrap_err()
    };
    assert!(err(&|p| p.truncate(4000)).contains("page size 4000"));
    assert!(err(&|p| p[OFF_LEVEL] = 2).contains("does not match level 2"));
    assert!(err(&|p| put_u16(p, OFF_CONTENT, 5000)).contains("past the page end"));
    assert!(err(&|p| put_u16(p, OFF_N_CELLS, 3000)).contains("slot array"));
    assert!(err(&|p| put_u16(p, NODE_HEADER_END, 4094)).contains("outside the content area"));
    let last = usize::from(crate::page::get_u16(&good, NODE_HEADER_END));
    assert!(err(&|p| put_u16(p, last, 4000)).contains("past the page end"));
    assert!(err(&|p| put_u16(p, NODE_HEADER_END + 2, last as u16)).contains("overlaps"));
    assert!(err(&|p| put_u16(p, OFF_FRAG, 1)).contains("fragmented"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The generator makes only valid nodes, so `validate` is not stricter
    /// than the format; and on each of them the accessors and methods hold.
    #[test]
    fn every_valid_layout_passes_and_survives_every_method(
        p in arbitrary_valid_node(),
        script in script(),
    ) {
        prop_assert_eq!(validate(&p), Ok(()));
        exercise(&p, &script);
    }

    #[test]
    fn mutated_nodes_that_pass_validate_never_panic(
        mut p in arbitrary_valid_node(),
        edits in proptest::collection::vec((any::<u16>(), any::<u8>(), any::<bool>()), 1..6),
        script in script(),
    ) {
        mutate(&mut p, &edits);
        if validate(&p).is_ok() && matches!(page_type(&p), Some(PageType::BtreeLeaf | PageType::BtreeInternal)) {
            exercise(&p, &script);
        }
    }

    #[test]
    fn validate_and_check_never_panic_on_random_pages(
        body in proptest::collection::vec(any::<u8>(), 0..512),
        level in any::<u8>(),
        n in 0u16..200,
        content in any::<u16>(),
        leaf in any::<bool>(),
    ) {
        let mut p = vec![0u8; 4096];
        let t = if leaf { PageType::BtreeLeaf } else { PageType::BtreeInternal };
        init_page(&mut p, PageId::new(0, 5), t);
        p[NODE_HEADER_END..NODE_HEADER_END + body.len()].copy_from_slice(&body);
        let tail = 4096 - body.len();
        p[tail..].copy_from_slice(&body);
        p[OFF_LEVEL] = level;
        put_u16(&mut p, OFF_N_CELLS, n);
        put_u16(&mut p, OFF_CONTENT, content);
        let _ = check(&p);
        if validate(&p).is_ok() {
            exercise(&p, &body);
        }
    }

    #[test]
    fn validate_never_panics_on_any_buffer(b in proptest::collection::vec(any::<u8>(), 0..5000)) {
        let _ = validate(&b);
        let _ = validate_node(&b);
        let _ = check(&b);
    }
}
