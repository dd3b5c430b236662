//! Insertion: in place when the leaf has room, else splits cascading up,
//! growing the tree at the root (whose page never moves).

use super::apply::{alloc_node, apply, Plan};
use super::buf::NodeBuf;
use super::descend::{descend_write, leaf_for_write, Path};
use super::node::{self, internal_cell, leaf_cell, NodeMut, NodeRef, SLOT_SIZE};
use super::BTree;
use crate::buffer::PageWrite;
use crate::engine::admission::{Budget, Purpose};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::mtr::Mtr;
use crate::mtr::{estimate, mtr_bound};

impl BTree {
    /// Insert or replace `key`; true if a value was replaced. Reserves its
    /// redo before latching anything (see `engine::admission`): the caller
    /// must hold no latch.
    pub fn put(&self, e: &Engine, key: &[u8], value: &[u8]) -> Result<bool> {
        self.put_in(e, &e.adm.budget(Purpose::InFlight), key, value)
    }

    /// [`BTree::put`] paid from `budget` (topped up to what the operation
    /// needs, waiting for log space holding no latch).
    pub fn put_in(
        &self,
        e: &Engine,
        budget: &Budget<'_>,
        key: &[u8],
        value: &[u8],
    ) -> Result<bool> {
        node::check_entry(e.page_size(), key, value)?;
        let cell = leaf_cell(key, value);
        let ps = e.page_size();
        // A leaf that takes the cell in place logs the cell and a few
        // header and slot bytes (the whole page only when it compacts);
        // the split, if any, reserves its own bound as it descends.
        budget.with_estimate(estimate(ps, cell.len()), mtr_bound(1, ps), || {
            if let Some(replaced) = self.put_optimistic(e, budget, key, &cell)? {
                return Ok(replaced);
            }
            self.put_pessimistic(e, budget, key, &cell)
        })
    }

    /// The common case: the leaf has room. `None` means "restart pessimistically".
    fn put_optimistic(
        &self,
        e: &Engine,
        budget: &Budget<'_>,
        key: &[u8],
        cell: &[u8],
    ) -> Result<Option<bool>> {
        let Some(mut leaf) = leaf_for_write(e, self.root, key)? else {
            return Ok(None);
        };
        let mut n = NodeMut::new(&mut leaf);
        let replaced = match n.as_ref().search(key) {
            Ok(i) => n.replace_cell(i, cell).then_some(true),
            Err(i) => n.insert_cell(i, cell).then_some(false),
        };
        if replaced.is_some() {
            let mut mtr = Mtr::new(e, budget);
            mtr.keep(leaf);
            mtr.commit()?;
        }
        Ok(replaced)
    }

    fn put_pessimistic(
        &self,
        e: &Engine,
        budget: &Budget<'_>,
        key: &[u8],
        cell: &[u8],
    ) -> Result<bool> {
        let ps = e.page_size();
        let path = descend_write(e, budget, self.root, key, |n| {
            insert_safe(n, key, cell.len(), ps)
        })?;
        let mut leaf = NodeBuf::from_page(path.leaf());
        let replaced = match leaf.search(key) {
            Ok(i) => {
                leaf.cells[i] = cell.to_vec();
                true
            }
            Err(i) => {
                leaf.cells.insert(i, cell.to_vec());
                false
            }
        };
        let mut mtr = Mtr::new(e, budget);
        let mut new_pages = Vec::new();
        // On error the mtr and the new pages' guards, dropped uncommitted,
        // put the space header and the pages taken back as they were.
        let plan = plan_insert(&mut mtr, &path, leaf, ps, &mut new_pages)?;
        let mut pages = path.pages;
        pages.extend(new_pages);
        apply(mtr, pages, plan)?;
        Ok(replaced)
    }
}

/// Whether inserting the cell cannot propagate above this node: a leaf that
/// takes the cell without splitting, or an internal node with room for one
/// more separator of the largest size.
fn insert_safe(n: NodeRef<'_>, key: &[u8], cell_len: usize, ps: usize) -> bool {
    if !n.is_leaf() {
        return n.free_bytes() >= node::max_separator_bytes(ps);
    }
    match n.search(key) {
        Ok(i) => n.free_bytes() + n.cell(i).len() >= cell_len,
        Err(_) => n.free_bytes() >= cell_len + SLOT_SIZE,
    }
}

/// Compute the new images bottom-up from the modified leaf, allocating a
/// page for every split. Page indices: path pages first, then `new_pages`.
fn plan_insert<'a>(
    mtr: &mut Mtr<'a>,
    path: &Path<'a>,
    mut node: NodeBuf,
    ps: usize,
    new_pages: &mut Vec<PageWrite<'a>>,
) -> Result<Plan> {
    let base = path.pages.len();
    let mut plan = Plan::default();
    let mut level = base - 1;
    loop {
        if node.fits(ps) {
            plan.writes.push((level, node));
            return Ok(plan);
        }
        if level == 0 && path.top_is_root {
            grow_root(mtr, node, ps, base, new_pages, &mut plan)?;
            return Ok(plan);
        }
        if level == 0 {
            return Err(Error::Corruption(format!(
                "b-tree page {}: judged safe for an insert but overflows",
                path.pages[0].id()
            )));
        }
        let (left, right, sep) = node.split(ps)?;
        let page = alloc_node(mtr, right.level)?;
        let right_no = page.id().page_no;
        new_pages.push(page);
        plan.writes.push((base + new_pages.len() - 1, right));
        plan.writes.push((level, left));
        let pos = path.pos[level];
        level -= 1;
        node = NodeBuf::from_page(&path.pages[level]);
        node.cells.insert(pos, internal_cell(&sep, right_no));
    }
}

/// Split the root's content into two new pages and make the root their
/// parent, one level up: the root keeps its page id.
fn grow_root<'a>(
    mtr: &mut Mtr<'a>,
    node: NodeBuf,
    ps: usize,
    base: usize,
    new_pages: &mut Vec<PageWrite<'a>>,
    plan: &mut Plan,
) -> Result<()> {
    let (left, right, sep) = node.split(ps)?;
    let lp = alloc_node(mtr, left.level)?;
    let left_no = lp.id().page_no;
    new_pages.push(lp);
    let rp = alloc_node(mtr, right.level)?;
    let right_no = rp.id().page_no;
    new_pages.push(rp);
    let root = NodeBuf {
        level: left.level + 1,
        leftmost: left_no,
        cells: vec![internal_cell(&sep, right_no)],
    };
    let n = base + new_pages.len();
    plan.writes.push((n - 2, left));
    plan.writes.push((n - 1, right));
    plan.writes.push((0, root));
    Ok(())
}
