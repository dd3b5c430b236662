//! Deletion: in place when the leaf stays at least a quarter full; else merge
//! with an adjacent sibling (or redistribute with it), cascading up, and
//! collapse the root when it is left with a single child.

use super::apply::{apply, Plan};
use super::buf::NodeBuf;
use super::descend::{descend_write, expect_node, leaf_for_write, Path};
use super::node::{self, cell_child, internal_cell, NodeMut, NodeRef, SLOT_SIZE};
use super::BTree;
use crate::buffer::PageWrite;
use crate::engine::admission::Budget;
#[cfg(test)]
use crate::engine::admission::Purpose;
use crate::engine::Engine;
use crate::error::Result;
use crate::mtr::Mtr;
use crate::mtr::{estimate, mtr_bound};
use crate::page::PageId;

impl BTree {
    /// Remove `key`; true if it was present. Reserves its redo before
    /// latching anything: the caller must hold no latch.
    #[cfg(test)]
    pub fn delete(&self, e: &Engine, key: &[u8]) -> Result<bool> {
        self.delete_in(e, &e.adm.budget(Purpose::InFlight), key)
    }

    /// [`BTree::delete`] paid from `budget` (topped up to what the
    /// operation needs, waiting for log space holding no latch).
    #[cfg(test)]
    pub fn delete_in(&self, e: &Engine, budget: &Budget<'_>, key: &[u8]) -> Result<bool> {
        self.delete_if_in(e, budget, key, &|_| true)
    }

    /// Remove `key` if `remove_if` holds for its value, read under the
    /// leaf's exclusive latch (purge removes a delete mark only if it is
    /// still the version it purges). True if removed.
    pub fn delete_if_in(
        &self,
        e: &Engine,
        budget: &Budget<'_>,
        key: &[u8],
        remove_if: &dyn Fn(&[u8]) -> bool,
    ) -> Result<bool> {
        if key.len() > node::max_key_len(e.page_size()) {
            return Ok(false);
        }
        let ps = e.page_size();
        // A leaf losing one cell logs its slots and header; a merge, if
        // any, reserves its own bound as it descends.
        budget.with_estimate(estimate(ps, 0), mtr_bound(1, ps), || {
            if let Some(found) = self.delete_optimistic(e, budget, key, remove_if)? {
                return Ok(found);
            }
            self.delete_pessimistic(e, budget, key, remove_if)
        })
    }

    /// The common case: the leaf does not become underfull (or is the root).
    fn delete_optimistic(
        &self,
        e: &Engine,
        budget: &Budget<'_>,
        key: &[u8],
        remove_if: &dyn Fn(&[u8]) -> bool,
    ) -> Result<Option<bool>> {
        let Some(mut leaf) = leaf_for_write(e, self.root, key)? else {
            return Ok(None);
        };
        let is_root = leaf.id() == self.root;
        let n = NodeRef::new(&leaf);
        let Ok(i) = n.search(key) else {
            return Ok(Some(false));
        };
        if !remove_if(n.value(i)) {
            return Ok(Some(false));
        }
        let after = n.used_bytes() - n.cell(i).len() - SLOT_SIZE;
        if !is_root && after < node::underflow_bytes(e.page_size()) {
            return Ok(None);
        }
        NodeMut::new(&mut leaf).remove_cell(i);
        let mut mtr = Mtr::new(e, budget);
        mtr.keep(leaf);
        mtr.commit()?;
        Ok(Some(true))
    }

    fn delete_pessimistic(
        &self,
        e: &Engine,
        budget: &Budget<'_>,
        key: &[u8],
        remove_if: &dyn Fn(&[u8]) -> bool,
    ) -> Result<bool> {
        let ps = e.page_size();
        let mut path = descend_write(e, budget, self.root, key, |n| delete_safe(n, key, ps))?;
        let n = NodeRef::new(path.leaf());
        match n.search(key) {
            Ok(i) if remove_if(n.value(i)) => {}
            _ => return Ok(false),
        }
        let mut leaf = NodeBuf::from_page(path.leaf());
        let Ok(i) = leaf.search(key) else {
            return Ok(false);
        };
        leaf.cells.remove(i);
        let mtr = Mtr::new(e, budget);
        let mut siblings = Vec::new();
        let plan = plan_delete(e, self.root, &mut path, leaf, &mut siblings)?;
        let mut pages = path.pages;
        pages.extend(siblings);
        apply(mtr, pages, plan)?;
        Ok(true)
    }
}

/// Whether removing the key (at a leaf) or one separator (at an internal
/// node) leaves this node at least at the underflow threshold, so nothing
/// propagates above it.
fn delete_safe(n: NodeRef<'_>, key: &[u8], ps: usize) -> bool {
    let loss = if n.is_leaf() {
        match n.search(key) {
            Ok(i) => n.cell(i).len() + SLOT_SIZE,
            Err(_) => return true,
        }
    } else {
        node::max_separator_bytes(ps)
    };
    n.used_bytes() >= loss + node::underflow_bytes(ps)
}

/// Compute new images bottom-up from the leaf that lost its entry. Page
/// indices: path pages first, then `siblings` (latched here).
fn plan_delete<'a>(
    e: &'a Engine,
    root: PageId,
    path: &mut Path<'a>,
    mut node: NodeBuf,
    siblings: &mut Vec<PageWrite<'a>>,
) -> Result<Plan> {
    let mut plan = Plan::default();
    let mut level = path.pages.len() - 1;
    // Index in `plan.writes` of the latest merge's result, for a root collapse.
    let mut last_merge: Option<usize> = None;
    loop {
        if level == 0 {
            let collapse = path.top_is_root && !node.is_leaf() && node.cells.is_empty();
            match last_merge.filter(|_| collapse) {
                Some(w) => {
                    // The root's only child moves into the root page.
                    let (child, img) = plan.writes.swap_remove(w);
                    plan.writes.push((0, img));
                    plan.frees.push(child);
                }
                None => plan.writes.push((0, node)),
            }
            return Ok(plan);
        }
        if node.used_bytes() >= node::underflow_bytes(e.page_size()) {
            plan.writes.push((level, node));
            return Ok(plan);
        }
        let sib = Sibling {
            e,
            root,
            base: path.pages.len(),
        };
        match sib.rebalance(path, level, node, siblings, &mut plan)? {
            Some(parent) => {
                last_merge = Some(plan.writes.len() - 1);
                node = parent;
                level -= 1;
            }
            None => return Ok(plan),
        }
    }
}

struct Sibling<'a> {
    e: &'a Engine,
    root: PageId,
    /// Page index of the first sibling (after the path pages).
    base: usize,
}

impl<'a> Sibling<'a> {
    /// Merge the underfull `node` (at `path.pages[level]`) with an adjacent
    /// sibling, or redistribute with it, or leave it underfull. After a merge
    /// (the merged image is the last write) returns the parent, which lost a
    /// separator and may underflow in turn.
    fn rebalance(
        &self,
        path: &mut Path<'a>,
        level: usize,
        node: NodeBuf,
        siblings: &mut Vec<PageWrite<'a>>,
        plan: &mut Plan,
    ) -> Result<Option<NodeBuf>> {
        let ps = self.e.page_size();
        let mut parent = NodeBuf::from_page(&path.pages[level - 1]);
        let pos = path.pos[level];
        if parent.cells.is_empty() {
            // An only child has no sibling to take from: stay underfull.
            plan.writes.push((level, node));
            return Ok(None);
        }
        let node_is_left = pos < parent.cells.len();
        let sib_pos = if node_is_left { pos + 1 } else { pos - 1 };
        let sib_id = PageId::new(self.root.space, child_at(&parent, sib_pos));
        let sib = latch_sibling(self.e, path, level, sib_id, node_is_left, node.level)?;
        let sib_buf = NodeBuf::from_page(&sib);
        siblings.push(sib);
        let sib_ix = self.base + siblings.len() - 1;
        let sep_ix = if node_is_left { pos } else { pos - 1 };
        let alone = node.clone();
        let ((l_ix, lbuf), (r_ix, rbuf)) = if node_is_left {
            ((level, node), (sib_ix, sib_buf))
        } else {
            ((sib_ix, sib_buf), (level, node))
        };
        let combined = NodeBuf::merge(lbuf, parent.key(sep_ix), rbuf);
        if combined.fits(ps) {
            plan.frees.push(r_ix);
            plan.writes.push((l_ix, combined));
            parent.cells.remove(sep_ix);
            return Ok(Some(parent));
        }
        let (l, r, sep) = combined.split(ps)?;
        parent.cells[sep_ix] = internal_cell(&sep, cell_child(&parent.cells[sep_ix]));
        if parent.fits(ps) {
            plan.writes.push((l_ix, l));
            plan.writes.push((r_ix, r));
            plan.writes.push((level - 1, parent));
        } else {
            // The new separator does not fit: correctness first, stay underfull.
            plan.writes.push((level, alone));
        }
        Ok(None)
    }
}

fn child_at(n: &NodeBuf, pos: usize) -> u32 {
    if pos == 0 {
        n.leftmost
    } else {
        cell_child(&n.cells[pos - 1])
    }
}

/// Latch the sibling of `path.pages[level]` exclusively. Latches among
/// siblings are taken left before right: for a left sibling the node's own
/// latch is dropped and retaken after it. That is safe because we hold the
/// parent exclusively, and without sibling pointers nobody reaches either
/// child except through the parent; the node's content cannot change in
/// between.
fn latch_sibling<'a>(
    e: &'a Engine,
    path: &mut Path<'a>,
    level: usize,
    sib_id: PageId,
    sib_is_right: bool,
    node_level: u8,
) -> Result<PageWrite<'a>> {
    let sib = if sib_is_right {
        e.pool.write(sib_id)?
    } else {
        let id = path.pages[level].id();
        drop(path.pages.remove(level));
        let sib = e.pool.write(sib_id)?;
        path.pages.insert(level, e.pool.write(id)?);
        sib
    };
    expect_node(&sib, sib_id, Some(node_level))?;
    Ok(sib)
}
