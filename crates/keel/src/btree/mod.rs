//! B+trees over buffer-pool pages: the engine's tables and indexes.
//!
//! A tree is named by its root page, which never moves: when the root
//! splits, its content moves into two new pages and the root becomes their
//! parent one level up; when an internal root is left with a single child,
//! that child's content moves into the root and the child is freed. Node
//! layout: [`node`]. Every change is made inside a mini-transaction: pages
//! it modifies are handed to `Mtr::keep`, pages that leave the tree to
//! `Mtr::free_page`, and everything that can fail (reads, allocations) is
//! done before the first byte of a latched page changes, so an error leaves
//! the tree as it was.
//!
//! # Concurrency: latch coupling
//!
//! - **Readers** descend with shared latches, taking the child's latch
//!   before releasing the parent's. Range scans have no sibling pointers:
//!   the [`Cursor`] copies one leaf's entries, releases it, and descends
//!   again from the root to the next leaf (see `cursor`).
//! - **Writers, optimistic first**: shared latches down to the leaf's
//!   parent, exclusive on the leaf (for a root leaf: read its level under a
//!   shared latch, re-latch exclusively and re-check). If the change fits
//!   without split or underflow it is done in one mtr.
//! - **Otherwise pessimistic**: exclusive latches from the root down; when
//!   the node just latched is *safe* all its ancestors are released (insert:
//!   room for one more separator of maximum size; delete: still at or above
//!   the underflow threshold after losing such a separator). Splits, merges
//!   and redistributions then only touch latched pages.
//! - **Order**: latches are taken top-down, and among siblings left before
//!   right (a writer that needs a left sibling releases its node and
//!   re-latches it after the sibling; the exclusively latched parent keeps
//!   everyone else out). Allocation and freeing, which latch the space
//!   header, happen only while tree latches are held, never the reverse.
//!
//! Deletes merge a node that drops below a quarter of the page with an
//! adjacent sibling under the same parent when both fit in one page, else
//! redistribute when the new separator fits in the parent, else leave the
//! node underfull; merges cascade up. Leaf separators are shortened to the
//! shortest key between the two leaves.

mod apply;
mod buf;
pub(crate) mod bulk;
mod check;
mod cursor;
mod delete;
mod descend;
mod insert;
pub(crate) mod node;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod bound_tests;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod fault_tests;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod hot_read_tests;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod node_tests;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod test_engine;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;

use std::ops::Bound;

pub use check::TreeStats;
pub(crate) use check::{check_tree, Pages};
pub use cursor::Cursor;
pub(crate) use cursor::LendRows;
pub(crate) use descend::expect_node;

use node::{NodeMut, NodeRef};

use crate::engine::Engine;
use crate::error::Result;
use crate::mtr::{mtr_bound, Mtr};
use crate::page::{PageId, PageType};

/// Most pages one pessimistic operation on a tree whose root is at `level`
/// can change in its mini-transaction: every node of the path (at most
/// `level + 1`), a new page per split below the root and two for a root
/// split (at most `level + 2`), and the space header page; a delete's
/// siblings (at most one per level) and freed pages stay within the same
/// count. Checked against real operations by `tests::redo_stays_within_the_bound`.
pub(super) const fn pessimistic_pages(level: u8) -> usize {
    2 * (level as usize + 1) + 2
}

/// [`pessimistic_pages`] in redo bytes.
pub(super) const fn pessimistic_bound(level: u8, page_size: usize) -> u64 {
    mtr_bound(pessimistic_pages(level), page_size)
}

/// A B+tree, named by its root page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BTree {
    root: PageId,
}

impl BTree {
    /// Allocate an empty tree (a root leaf) inside `mtr`.
    pub fn create(mtr: &mut Mtr<'_>) -> Result<BTree> {
        let mut page = mtr.alloc_page(PageType::BtreeLeaf)?;
        BTree::init_root(&mut page);
        let root = page.id();
        mtr.keep(page);
        Ok(BTree { root })
    }

    /// Format an already allocated page (its common header set) as the root
    /// leaf of an empty tree.
    pub fn init_root(page: &mut [u8]) {
        NodeMut::init(page, 0, 0);
    }

    /// The tree whose root is `root`.
    pub fn open(root: PageId) -> BTree {
        BTree { root }
    }

    /// The root page: the tree's permanent name.
    pub fn root(&self) -> PageId {
        self.root
    }

    /// The value stored under `key`.
    pub fn get(&self, e: &Engine, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if key.len() > node::max_key_len(e.page_size()) {
            return Ok(None);
        }
        let leaf = descend::descend_read(e, self.root, |n| n.child_pos(key))?;
        let n = NodeRef::new(&leaf);
        Ok(n.search(key).ok().map(|i| n.value(i).to_vec()))
    }

    /// Entries with keys between `lo` and `hi`, ascending or (with
    /// `reverse`) descending.
    pub fn range<'a>(
        &self,
        e: &'a Engine,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        reverse: bool,
    ) -> Cursor<'a> {
        Cursor::new(e, self.root, lo, hi, reverse)
    }
}
