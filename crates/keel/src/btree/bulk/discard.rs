//! Dropping a bulk load's hidden tree (see the parent module): what a
//! failed load does before it returns, and what the open after a crash or a
//! close does for a load that never finished. Each step is one mtr that
//! unlinks a batch of pages from the right edge and frees them, so the
//! hidden tree stays a valid tree between steps and a drop cut short by a
//! crash resumes where it stopped.
//!
//! Truncating and dropping a table use the same steps ([`empty_tree`]):
//! one mtr moves the table's tree under a new hidden root, marked pending
//! on the table's root as a load's would be, and the drop above frees it.
//! A crash in between leaves a mark that the next open follows as it
//! follows an unfinished load's, so an emptying cut short is finished
//! there.
//!
//! What a leaf value owns outside the tree (a table's large values:
//! overflow chains, `lob`) is freed through the caller's [`FreeValue`]
//! before the leaf is: each step first reads the leaves it is about to
//! free and frees what their values own, then frees the leaves. Freeing a
//! value must be idempotent (a step cut short by a crash frees the same
//! leaves' values again at the next open).

use super::super::descend::expect_node;
use super::super::node::{NodeMut, NodeRef};
use crate::buffer::PageWrite;
use crate::engine::admission::Purpose;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::mtr::{mtr_bound, Mtr};
use crate::page::PageId;

/// Frees what one leaf value owns outside the tree; idempotent (module
/// doc). The btree knows nothing of a value's format: the table layer
/// passes this.
pub(crate) type FreeValue = fn(&Engine, &[u8]) -> Result<()>;

/// A [`FreeValue`] for trees whose values own nothing (tests).
#[cfg(test)]
pub(crate) fn owns_nothing(_: &Engine, _: &[u8]) -> Result<()> {
    Ok(())
}

/// Pages one drop mtr frees below a node of the right edge, if the log and
/// the pool take them (see [`drop_step_pages`]): a freed page's redo is
/// about a page, so about 256 KiB of redo per mtr.
fn drop_batch_pages(page_size: usize) -> usize {
    ((256 << 10) / page_size).clamp(4, 64)
}

/// Pages one drop step below a hidden root at level `top` may change, and
/// the children it frees: the right edge (`top` nodes: each may be emptied
/// and freed, or lose a cell), the children, and the space header, all
/// latched at once. The batch shrinks to what the log takes (`max_pages`,
/// the most one mtr may change: `Admission::max_mtr_pages`) and to a
/// quarter of the `frames` of a buffer-pool instance (other threads need
/// theirs; one child at least). `None` when the log takes not even one
/// child, which no tree a load could build under the same log reaches (a
/// load needs `super::leaf_write_pages` of `top − 1` ≥ `top + 2` pages to grow
/// to `top`; `Engine::open` checks the log against that).
pub(crate) fn drop_step_pages(
    top: u8,
    page_size: usize,
    max_pages: usize,
    frames: usize,
) -> Option<(usize, usize)> {
    let fixed = usize::from(top) + 1;
    let by_log = max_pages.checked_sub(fixed)?;
    let by_pool = (frames / 4).saturating_sub(fixed).max(1);
    let batch = drop_batch_pages(page_size).min(by_log).min(by_pool);
    (batch > 0).then_some((fixed + batch, batch))
}

/// Empty the tree rooted at `root` (a table's truncate or drop): one mtr
/// copies the root's node into a new page, the *hidden root*, and turns
/// the root into an empty leaf marked pending with it; from that mtr on,
/// every descent from the root finds an empty tree. Then [`drop_hidden`]
/// frees the hidden tree step by step. Returns the LSN of the first mtr
/// (0 if the tree was empty already).
///
/// Readers and writers of the table need nothing more: every operation
/// starts at the root, latching page by page downwards (scans re-descend
/// for each leaf), so one that reached a page of the hidden tree before
/// the first mtr holds that page's latch until it is done with it, and a
/// drop step, which latches every page it frees, waits for it. A pending
/// mark already there (a bulk load under way) refuses the call with
/// [`Error::BulkLoad`].
pub(crate) fn empty_tree(
    e: &Engine,
    root: PageId,
    table: &str,
    free_value: FreeValue,
) -> Result<crate::page::Lsn> {
    let ps = e.page_size();
    let budget = e.adm.budget(Purpose::New);
    budget.ensure(mtr_bound(3, ps))?;
    let mut mtr = Mtr::new(e, &budget);
    let mut r = e.pool.write(root)?;
    expect_node(&r, root, None)?;
    let n = NodeRef::new(&r);
    if n.pending_bulk().is_some() {
        return Err(super::refused(
            table,
            "a bulk load into it is under way; retry once it ends",
        ));
    }
    if n.is_leaf() && n.n_cells() == 0 {
        return Ok(0);
    }
    let t = if n.is_leaf() {
        crate::page::PageType::BtreeLeaf
    } else {
        crate::page::PageType::BtreeInternal
    };
    let mut hidden = mtr.alloc_page(t)?;
    super::copy_node(&mut hidden, &r);
    let hidden_id = hidden.id();
    NodeMut::init(&mut r, 0, 0);
    NodeMut::new(&mut r).set_pending_bulk(Some(hidden_id.page_no));
    mtr.keep(hidden);
    mtr.keep(r);
    let lsn = mtr.commit()?;
    e.failpoints.hit("ddl.detached");
    drop_hidden(e, root, hidden_id, free_value)?;
    Ok(lsn)
}

/// Free the hidden tree rooted at `hidden` and clear the pending mark of
/// `target` if it still names it: what a failed bulk load and the open
/// after a crash do. Crash-safe and idempotent (see the module doc).
pub(crate) fn drop_hidden(
    e: &Engine,
    target: PageId,
    hidden: PageId,
    free_value: FreeValue,
) -> Result<()> {
    let ps = e.page_size();
    loop {
        let budget = e.adm.budget(Purpose::New);
        let root = e.pool.read(hidden)?;
        expect_node(&root, hidden, None)?;
        let top = NodeRef::new(&root).level();
        drop(root);
        if top == 0 {
            break;
        }
        let max = e.adm.max_mtr_pages(ps);
        let frames = e.pool.instances.iter().map(|i| i.frames.len()).min();
        let Some((pages, batch)) = drop_step_pages(top, ps, max, frames.unwrap_or(0)) else {
            return Err(Error::config(
                "log_file_size",
                format!(
                    "dropping the hidden tree of a bulk load (root page {hidden}, level {top}) \
                     needs mini-transactions of {} pages of {ps} bytes (page_size), but the \
                     redo log takes at most {max} in one: no load can have built that tree \
                     with this log",
                    usize::from(top) + 2
                ),
            ));
        };
        for leaf in leaves_of_step(e, hidden, batch)? {
            free_values(e, leaf, free_value)?;
        }
        budget.ensure(mtr_bound(pages, ps))?;
        let mut mtr = Mtr::new(e, &budget);
        drop_batch(e, &mut mtr, hidden, batch)?;
        mtr.commit()?;
    }
    // The hidden root is a leaf now (empty, unless the tree was one leaf).
    free_values(e, hidden, free_value)?;
    let budget = e.adm.budget(Purpose::New);
    budget.ensure(mtr_bound(3, ps))?;
    let mut mtr = Mtr::new(e, &budget);
    let mut root = e.pool.write(target)?;
    let h = e.pool.write(hidden)?;
    mtr.latch_header()?;
    // The hidden root is freed, and the table's mark cleared if it names
    // it, in one mtr (a mark naming a freed page would be followed by the
    // next open).
    if NodeRef::new(&root).pending_bulk() == Some(hidden.page_no) {
        NodeMut::new(&mut root).set_pending_bulk(None);
        mtr.keep(root);
    } else {
        drop(root);
    }
    mtr.free_page(h)?;
    mtr.commit()?;
    Ok(())
}

/// The leaves the next [`drop_batch`] of `batch` frees: the last children
/// of the right edge's node at level 1, read under shared latches (the
/// hidden tree changes only by the drop itself).
fn leaves_of_step(e: &Engine, hidden: PageId, batch: usize) -> Result<Vec<PageId>> {
    let mut id = hidden;
    let mut level = None;
    loop {
        let p = e.pool.read(id)?;
        expect_node(&p, id, level)?;
        let n = NodeRef::new(&p);
        match n.level() {
            0 => return Ok(Vec::new()),
            1 => {
                let cells = n.n_cells();
                let batch = batch.min(cells + 1);
                return Ok((cells + 1 - batch..=cells)
                    .map(|pos| PageId::new(hidden.space, n.child(pos)))
                    .collect());
            }
            l => {
                level = Some(l - 1);
                id = PageId::new(hidden.space, n.child(n.n_cells()));
            }
        }
    }
}

/// Free what the values of leaf `id` own (copied out under a shared
/// latch, freed holding nothing).
fn free_values(e: &Engine, id: PageId, free_value: FreeValue) -> Result<()> {
    let values: Vec<Vec<u8>> = {
        let p = e.pool.read(id)?;
        expect_node(&p, id, Some(0))?;
        let n = NodeRef::new(&p);
        (0..n.n_cells()).map(|i| n.value(i).to_vec()).collect()
    };
    for v in values {
        free_value(e, &v)?;
    }
    Ok(())
}

/// One drop step: latch the right edge from the hidden root down to the
/// level above the leaves, free up to `batch` of its last children, and
/// unlink every node left without children. Every page it changes, and the
/// space header, is latched (read if need be) before anything changes, so
/// a failed read changes nothing; were anything to fail later, the pages
/// go back as they were with the guards and the mtr (`mtr`'s module doc).
fn drop_batch<'a>(e: &'a Engine, mtr: &mut Mtr<'a>, hidden: PageId, batch: usize) -> Result<()> {
    let mut path: Vec<PageWrite<'a>> = vec![e.pool.write(hidden)?];
    loop {
        let last = &path[path.len() - 1];
        let n = NodeRef::new(last);
        if n.level() == 1 {
            break;
        }
        let id = PageId::new(hidden.space, n.child(n.n_cells()));
        let level = n.level() - 1;
        let p = e.pool.write(id)?;
        expect_node(&p, id, Some(level))?;
        path.push(p);
    }
    // The children to free, from the last.
    let d = path.len() - 1;
    let cells = NodeRef::new(&path[d]).n_cells();
    let batch = batch.min(cells + 1);
    let mut emptied = batch == cells + 1;
    let mut children = Vec::with_capacity(batch);
    for pos in (cells + 1 - batch..=cells).rev() {
        let id = PageId::new(hidden.space, NodeRef::new(&path[d]).child(pos));
        if id.page_no == 0 || id == hidden {
            return Err(Error::Corruption(format!(
                "b-tree page {}: child {pos} names page {id}",
                path[d].id()
            )));
        }
        children.push(e.pool.write(id)?);
    }
    mtr.latch_header()?;
    for page in children {
        let n = NodeRef::new(&path[d]).n_cells();
        if n > 0 {
            NodeMut::new(&mut path[d]).remove_cell(n - 1);
        }
        mtr.free_page(page)?;
    }
    // Unlink emptied nodes bottom-up: each was its parent's last child.
    let mut keep = Vec::new();
    while let Some(p) = path.pop() {
        if !emptied {
            keep.push(p);
            continue;
        }
        match path.last_mut() {
            Some(parent) => {
                let cells = NodeRef::new(parent).n_cells();
                if cells > 0 {
                    NodeMut::new(parent).remove_cell(cells - 1);
                    emptied = false;
                }
                mtr.free_page(p)?;
            }
            None => {
                // The hidden root lost its last child: an empty leaf again.
                let mut root = p;
                NodeMut::init(&mut root, 0, 0);
                keep.push(root);
            }
        }
    }
    for p in keep {
        mtr.keep(p);
    }
    Ok(())
}
