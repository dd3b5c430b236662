//! Validation of node images from disk.
//!
//! A page's checksum proves it is the image that was written, not that the
//! image makes sense: a bug (or a forged page) can write a checksum-valid
//! node whose slots point anywhere. [`validate`] checks exactly what
//! [`NodeRef`] and [`NodeMut`] rely on, cheaply enough to run on every page
//! read from disk; [`check`] adds what only a full check needs (key order,
//! size limits, child pointers).

use super::{
    cell_len_at, max_key_len, max_value_len, NodeRef, INTERNAL_CELL_HEADER, LEAF_CELL_HEADER,
};
use crate::error::{Error, Result};
use crate::page::{is_page_size, page_id, page_type, PageType};

/// Structural validation of a page image read from disk. B+tree nodes (page
/// types 2 and 3) are checked for everything [`NodeRef`] and [`NodeMut`]
/// rely on:
///
/// - the image is a page (a power of two in 4096..=65536 bytes);
/// - the type agrees with the level (leaf ⇔ level 0);
/// - the content start is inside the page and the slot array ends at or
///   before it;
/// - every slot points into the content area at a cell whose header, and
///   whole extent as the header gives it, lie inside the page;
/// - no two cells overlap;
/// - the cells and the recorded fragmented bytes add up to the content area.
///
/// On an image that passes with a node type, no `NodeRef` accessor and no
/// `NodeMut` method panics (with indexes in range and well-formed cells), and
/// every `NodeMut` method leaves an image that passes again: the property
/// tests beside this module prove it. Keys are not compared (that is
/// [`check`]'s job), so a node with keys out of order passes.
///
/// Pages of other types pass: they have no node structure, and the tree
/// refuses to descend into a page whose type is not a node's.
///
/// [`NodeMut`]: super::NodeMut
pub(crate) fn validate(b: &[u8]) -> std::result::Result<(), String> {
    match page_type(b) {
        Some(PageType::BtreeLeaf | PageType::BtreeInternal) => validate_node(b),
        _ => Ok(()),
    }
}

/// [`validate`] for an image that must be a node, whatever its type says.
fn validate_node(b: &[u8]) -> std::result::Result<(), String> {
    if !is_page_size(b.len()) {
        return Err(format!("page size {} out of range", b.len()));
    }
    let r = NodeRef::new(b);
    let want = if r.is_leaf() {
        PageType::BtreeLeaf
    } else {
        PageType::BtreeInternal
    };
    if page_type(b) != Some(want) {
        return Err(format!(
            "page type {:?} does not match level {}",
            page_type(b),
            r.level()
        ));
    }
    let (n, start) = (r.n_cells(), r.content_start());
    if start > b.len() {
        return Err(format!(
            "content start {start} is past the page end {}",
            b.len()
        ));
    }
    if r.slot_end() > start {
        return Err(format!(
            "slot array of {n} cells ends at {} past the content start {start}",
            r.slot_end()
        ));
    }
    check_cells(b, r, start)
}

/// Validate a node image fully: [`validate`]'s structure (whatever the type
/// says), keys strictly ascending and within the size limits, and no child
/// pointer to page 0.
pub fn check(b: &[u8]) -> Result<()> {
    let id = page_id(b);
    let bad = |msg: String| Err(Error::Corruption(format!("b-tree node {id}: {msg}")));
    validate_node(b).or_else(bad)?;
    let r = NodeRef::new(b);
    if !r.is_leaf() {
        for pos in 0..=r.n_cells() {
            if r.child(pos) == 0 {
                return bad(format!("child at position {pos} is page 0"));
            }
        }
    }
    check_keys(r).or_else(bad)
}

/// Cells within `[start, len)`, disjoint, and accounting that adds up.
fn check_cells(b: &[u8], r: NodeRef<'_>, start: usize) -> std::result::Result<(), String> {
    let leaf = r.is_leaf();
    let hdr = if leaf {
        LEAF_CELL_HEADER
    } else {
        INTERNAL_CELL_HEADER
    };
    let mut spans = Vec::with_capacity(r.n_cells());
    for i in 0..r.n_cells() {
        let off = r.offset(i);
        if off < start || off + hdr > b.len() {
            return Err(format!(
                "cell {i} at offset {off} outside the content area [{start}, {})",
                b.len()
            ));
        }
        let end = off + cell_len_at(b, off, leaf);
        if end > b.len() {
            return Err(format!(
                "cell {i} at offset {off} ends at {end}, past the page end {}",
                b.len()
            ));
        }
        spans.push((off, end, i));
    }
    spans.sort_unstable();
    for w in spans.windows(2) {
        if w[0].1 > w[1].0 {
            return Err(format!(
                "cell {} [{}, {}) overlaps cell {} [{}, {})",
                w[0].2, w[0].0, w[0].1, w[1].2, w[1].0, w[1].1
            ));
        }
    }
    let cell_bytes: usize = spans.iter().map(|s| s.1 - s.0).sum();
    if cell_bytes + r.frag_bytes() != b.len() - start {
        return Err(format!(
            "content area of {} bytes holds {cell_bytes} cell bytes but {} fragmented bytes are recorded",
            b.len() - start,
            r.frag_bytes()
        ));
    }
    Ok(())
}

/// Keys strictly ascending; key and value lengths within limits.
fn check_keys(r: NodeRef<'_>) -> std::result::Result<(), String> {
    let ps = r.b.len();
    for i in 0..r.n_cells() {
        let k = r.key(i);
        if k.len() > max_key_len(ps) {
            return Err(format!("key {i} is {} bytes long", k.len()));
        }
        if r.is_leaf() && r.value(i).len() > max_value_len(ps) {
            return Err(format!("value {i} is {} bytes long", r.value(i).len()));
        }
        if i > 0 && r.key(i - 1) >= k {
            return Err(format!("keys {} and {i} are not strictly ascending", i - 1));
        }
    }
    Ok(())
}

/// Run every [`NodeRef`] accessor on `b`, then the [`NodeMut`] methods that
/// `script` picks (3 bytes per step: method, position, cell size) on a copy.
/// Panics — the finding — if an accessor or method panics, or if a method
/// leaves an image that [`validate`] refuses. `b` must have passed
/// `validate` with a node type. Shared by the property tests and the fuzz
/// target.
///
/// [`NodeMut`]: super::NodeMut
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn exercise(b: &[u8], script: &[u8]) {
    use super::{internal_cell, leaf_cell, NodeMut};

    read_all(NodeRef::new(b));
    let _ = check(b);
    let mut page = b.to_vec();
    for step in script.chunks(3) {
        let (op, pos, size) = (step[0], step.get(1).copied(), step.get(2).copied());
        let (pos, size) = (
            usize::from(pos.unwrap_or(0)),
            usize::from(size.unwrap_or(0)),
        );
        let r = NodeRef::new(&page);
        let n = r.n_cells();
        // A cell of the node's kind: key and value lengths from `size`.
        let key = vec![size as u8; size % 40];
        let cell = if r.is_leaf() {
            leaf_cell(&key, &vec![op; size * 7 % 300])
        } else {
            internal_cell(&key, u32::from(op) + 1)
        };
        let mut m = NodeMut::new(&mut page);
        match op % 4 {
            0 => {
                m.insert_cell(pos % (n + 1), &cell);
            }
            1 if n > 0 => m.remove_cell(pos % n),
            2 if n > 0 => {
                m.replace_cell(pos % n, &cell);
            }
            _ => m.compact(),
        }
        if let Err(e) = validate_node(&page) {
            panic!("step {step:?} left an invalid node: {e}");
        }
        read_all(NodeRef::new(&page));
    }
}

/// Every accessor of a node, for every index in range.
#[cfg(any(test, feature = "fuzzing"))]
fn read_all(r: NodeRef<'_>) {
    let n = r.n_cells();
    let sum = r.level() as usize
        + r.content_start()
        + r.frag_bytes()
        + r.used_bytes()
        + r.free_bytes()
        + r.cells().map(<[u8]>::len).sum::<usize>();
    std::hint::black_box(sum);
    for i in 0..n {
        let key = r.key(i);
        let _ = std::hint::black_box((r.cell(i), r.search(key), r.child_pos(key)));
        if r.is_leaf() {
            std::hint::black_box(r.value(i));
        }
    }
    if !r.is_leaf() {
        for pos in 0..=n {
            std::hint::black_box(r.child(pos));
        }
    }
    let _ = std::hint::black_box((r.search(b""), r.search(&[0xff; 8])));
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
