//! Full invariant check of a tree, with statistics.

use std::collections::HashSet;

use super::descend::expect_node;
use super::node::{self, NodeRef};
use super::BTree;
use crate::buffer::PageRead;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::page::PageId;

/// Shape and content of a tree, as measured by a full check.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TreeStats {
    /// Number of levels, leaves included (a lone root leaf has height 1).
    pub height: usize,
    /// Leaf pages.
    pub leaf_pages: usize,
    /// Internal pages.
    pub internal_pages: usize,
    /// Key-value entries.
    pub entries: usize,
    /// Bytes of keys stored in leaves.
    pub key_bytes: u64,
    /// Bytes of values stored in leaves.
    pub value_bytes: u64,
    /// Fraction of the pages' usable bytes taken by cells and slots.
    pub fill: f64,
}

/// Key range a subtree must respect: `[lo, hi)`, `None` = unbounded.
struct Bounds<'k> {
    lo: Option<&'k [u8]>,
    hi: Option<&'k [u8]>,
}

struct Walk<'e> {
    e: &'e Engine,
    space: u32,
    seen: HashSet<u32>,
    stats: TreeStats,
    used_bytes: u64,
}

impl BTree {
    /// Check every node and the tree's shape: node images valid, keys within
    /// the bounds set by the parents' separators, child levels exactly one
    /// below their parent (so all leaves are at level 0 and equally deep), no
    /// page reachable twice. Holds shared latches along the current path,
    /// so it sees a consistent tree while writers run.
    pub fn check(&self, e: &Engine) -> Result<TreeStats> {
        let root = e.pool.read(self.root)?;
        expect_node(&root, self.root, None)?;
        let height = NodeRef::new(&root).level() as usize + 1;
        let mut w = Walk {
            e,
            space: self.root.space,
            seen: HashSet::new(),
            stats: TreeStats::default(),
            used_bytes: 0,
        };
        w.seen.insert(self.root.page_no);
        w.node(root, Bounds { lo: None, hi: None })?;
        let pages = w.stats.leaf_pages + w.stats.internal_pages;
        w.stats.height = height;
        w.stats.fill = w.used_bytes as f64 / (pages * node::usable_bytes(e.page_size())) as f64;
        Ok(w.stats)
    }
}

impl Walk<'_> {
    fn node(&mut self, page: PageRead<'_>, b: Bounds<'_>) -> Result<()> {
        node::check(&page)?;
        let n = NodeRef::new(&page);
        check_bounds(page.id(), n, &b)?;
        self.used_bytes += n.used_bytes() as u64;
        if n.is_leaf() {
            self.stats.leaf_pages += 1;
            self.stats.entries += n.n_cells();
            for i in 0..n.n_cells() {
                self.stats.key_bytes += n.key(i).len() as u64;
                self.stats.value_bytes += n.value(i).len() as u64;
            }
            return Ok(());
        }
        self.stats.internal_pages += 1;
        for pos in 0..=n.n_cells() {
            let no = n.child(pos);
            if !self.seen.insert(no) {
                return Err(Error::Corruption(format!(
                    "b-tree page {}: child page {no} at position {pos} is reachable twice",
                    page.id()
                )));
            }
            let id = PageId::new(self.space, no);
            let child = self.e.pool.read(id)?;
            expect_node(&child, id, Some(n.level() - 1))?;
            let lo = if pos == 0 { b.lo } else { Some(n.key(pos - 1)) };
            let hi = if pos == n.n_cells() {
                b.hi
            } else {
                Some(n.key(pos))
            };
            self.node(child, Bounds { lo, hi })?;
        }
        Ok(())
    }
}

/// The node's keys lie within `[lo, hi)` (keys are sorted: check the ends).
fn check_bounds(id: PageId, n: NodeRef<'_>, b: &Bounds<'_>) -> Result<()> {
    let count = n.n_cells();
    if count == 0 {
        return Ok(());
    }
    if let Some(lo) = b.lo {
        if n.key(0) < lo {
            return Err(Error::Corruption(format!(
                "b-tree page {id}: first key {:?} is below the parent's separator {lo:?}",
                n.key(0)
            )));
        }
    }
    if let Some(hi) = b.hi {
        if n.key(count - 1) >= hi {
            return Err(Error::Corruption(format!(
                "b-tree page {id}: last key {:?} is not below the parent's next separator {hi:?}",
                n.key(count - 1)
            )));
        }
    }
    Ok(())
}
