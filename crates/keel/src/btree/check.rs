//! Full invariant check of a tree, with statistics, over any source of
//! pages ([`Pages`]): the buffer pool of a running engine, or the data
//! files as they stand (`format::tree`, for tools that must not open the
//! engine).

use std::collections::HashSet;
use std::ops::Deref;

use super::descend::expect_node;
use super::node::{self, NodeRef};
use super::BTree;
use crate::buffer::PageRead;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::page::PageId;

/// Where a check reads a tree's pages from. A page stays readable (and,
/// in the pool, share-latched) while its value lives.
pub(crate) trait Pages {
    /// A page image.
    type Page<'a>: Deref<Target = [u8]>
    where
        Self: 'a;
    /// Page `id`, verified as a read from disk is (checksum, identity).
    fn page(&self, id: PageId) -> Result<Self::Page<'_>>;
    /// Bytes per page.
    fn page_size(&self) -> usize;
}

impl Pages for Engine {
    type Page<'a> = PageRead<'a>;
    fn page(&self, id: PageId) -> Result<PageRead<'_>> {
        self.pool.read(id)
    }
    fn page_size(&self) -> usize {
        Engine::page_size(self)
    }
}

/// Called with every leaf entry, in key order.
pub(crate) type Visit<'v> = &'v mut dyn FnMut(&[u8], &[u8]);

/// Shape and content of a tree, as measured by a full check.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TreeStats {
    /// Number of levels, leaves included (a lone root leaf has height 1).
    pub height: usize,
    /// Leaf pages.
    pub leaf_pages: usize,
    /// Internal pages.
    pub internal_pages: usize,
    /// Key-value entries (records), delete-marked ones included.
    pub entries: usize,
    /// Of `entries`, a table's rows whose newest version is a delete mark
    /// that purge has not removed yet: no read sees them as rows. Counted
    /// by the layer that knows the row format (0 for the catalog's tree,
    /// whose values are not versioned).
    pub delete_marked: usize,
    /// Bytes of keys stored in leaves.
    pub key_bytes: u64,
    /// Bytes of values stored in leaves.
    pub value_bytes: u64,
    /// Overflow pages holding a table's large values (counted by the
    /// layer that knows the row format; 0 for the catalog).
    pub overflow_pages: usize,
    /// Fraction of the pages' usable bytes taken by cells and slots.
    pub fill: f64,
}

/// Key range a subtree must respect: `[lo, hi)`, `None` = unbounded.
struct Bounds<'k> {
    lo: Option<&'k [u8]>,
    hi: Option<&'k [u8]>,
}

struct Walk<'p, 'v, P: Pages> {
    pages: &'p P,
    space: u32,
    seen: HashSet<u32>,
    stats: TreeStats,
    used_bytes: u64,
    visit: Option<Visit<'v>>,
}

impl BTree {
    /// Check every node and the tree's shape: node images valid, keys within
    /// the bounds set by the parents' separators, child levels exactly one
    /// below their parent (so all leaves are at level 0 and equally deep), no
    /// page reachable twice. Holds shared latches along the current path,
    /// so it sees a consistent tree while writers run.
    pub fn check(&self, e: &Engine) -> Result<TreeStats> {
        check_tree(e, self.root, None)
    }
}

/// [`BTree::check`] of the tree rooted at `root` over `pages`, calling
/// `visit` (if any) with every entry, in key order, as the walk passes it.
pub(crate) fn check_tree<P: Pages>(
    pages: &P,
    root: PageId,
    visit: Option<Visit<'_>>,
) -> Result<TreeStats> {
    let root_page = pages.page(root)?;
    expect_node(&root_page, root, None)?;
    let height = NodeRef::new(&root_page).level() as usize + 1;
    let mut w = Walk {
        pages,
        space: root.space,
        seen: HashSet::new(),
        stats: TreeStats::default(),
        used_bytes: 0,
        visit,
    };
    w.seen.insert(root.page_no);
    w.node(root_page, root, Bounds { lo: None, hi: None })?;
    let n_pages = w.stats.leaf_pages + w.stats.internal_pages;
    w.stats.height = height;
    w.stats.fill = w.used_bytes as f64 / (n_pages * node::usable_bytes(pages.page_size())) as f64;
    Ok(w.stats)
}

impl<'p, P: Pages> Walk<'p, '_, P> {
    fn node(&mut self, page: P::Page<'p>, id: PageId, b: Bounds<'_>) -> Result<()> {
        node::check(&page)?;
        let n = NodeRef::new(&page);
        check_bounds(id, n, &b)?;
        self.used_bytes += n.used_bytes() as u64;
        if n.is_leaf() {
            self.stats.leaf_pages += 1;
            self.stats.entries += n.n_cells();
            for i in 0..n.n_cells() {
                self.stats.key_bytes += n.key(i).len() as u64;
                self.stats.value_bytes += n.value(i).len() as u64;
                if let Some(visit) = self.visit.as_mut() {
                    visit(n.key(i), n.value(i));
                }
            }
            return Ok(());
        }
        self.stats.internal_pages += 1;
        for pos in 0..=n.n_cells() {
            let no = n.child(pos);
            if !self.seen.insert(no) {
                return Err(Error::Corruption(format!(
                    "b-tree page {id}: child page {no} at position {pos} is reachable twice"
                )));
            }
            let child_id = PageId::new(self.space, no);
            let child = self.pages.page(child_id)?;
            expect_node(&child, child_id, Some(n.level() - 1))?;
            let lo = if pos == 0 { b.lo } else { Some(n.key(pos - 1)) };
            let hi = if pos == n.n_cells() {
                b.hi
            } else {
                Some(n.key(pos))
            };
            self.node(child, child_id, Bounds { lo, hi })?;
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
