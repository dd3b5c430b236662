//! Bulk load: build a tree bottom-up from rows in key order, instead of
//! inserting them one by one.
//!
//! # What it does
//!
//! Rows fill a leaf image in private memory up to the fill target (no
//! descent, no split, no cell built outside the page); each full leaf is
//! written into a new page by one mini-transaction that also adds its
//! separator to the *right edge* of the tree built so far: the last node of
//! each level. A right-edge node that is full gets a new right neighbour
//! instead of splitting (it gives that neighbour its last child, so no node
//! is ever left without a separator), and when the top is full it grows one
//! level, its content moving into a new page as a root split does. So a
//! loaded leaf is written once, filled to the fill target, and every node
//! above it is filled the same way (past the target only by what a node
//! must hold: one entry in a leaf, two separators above; see
//! [`fill_bytes`]).
//!
//! # Crash safety: redo-logged, published atomically
//!
//! Every page is built by an ordinary mini-transaction, so it is
//! redo-logged like any change (a new page's record is its bytes, the free
//! space inside it skipped) and flushed by the page cleaners like any
//! dirty page; the bulk load needs no sync of the data files and no
//! flushing of its own. The rows stay invisible until the end:
//!
//! 1. **Begin** (one mtr): the table's root, which must be an empty leaf,
//!    is marked *pending* with the page number of a new *hidden root*
//!    (in the root page's common header, where it survives any rewrite of
//!    the node; see `node`); the hidden root starts as an empty leaf.
//! 2. **Build**: the tree grows under the hidden root, one mtr per leaf.
//!    After every mtr it is a complete, valid B+tree, reachable only from
//!    the pending mark, so readers and writers of the table see it empty.
//! 3. **Publish** (one mtr): the hidden root's content is copied into the
//!    table's root page (which never moves), the mark is cleared, and the
//!    hidden root page is freed. The loaded rows appear at once, all of
//!    them. The log is then synced up to that mtr, so a bulk load that
//!    returned `Ok` survives any crash whatever `flush_log_at_trx_commit`
//!    says.
//!
//! A crash before the publish is durable leaves the mark, and so does a
//! close of the database while the load runs (the load then fails with
//! `Error::Closed`, and may no longer write to drop what it built): the
//! next open (`Db::open`, after recovery) drops the hidden tree and clears
//! the mark, so the table is empty and not a page leaks. A bulk load that
//! fails (an unsorted key, an entry too large, an I/O error) does the same
//! before it returns its error. Every step is one mtr, all or nothing: a leaf write,
//! drop step or publish that fails half-way (an allocation, or a read of
//! the space header, after the root grew or a node split or the table's
//! root took the hidden root's content) is dropped uncommitted, which puts
//! every page it changed back and gives back the pages it took (`mtr`'s
//! module doc), so memory never holds a change the log does not and a
//! publish that failed leaves the hidden tree the load's alone to drop.
//! The publish and the drop steps latch the space header before they
//! change anything, so that read cannot fail half-way. Dropping is itself
//! crash-safe: each of its mtrs unlinks a batch of pages from the right
//! edge and frees them together, so the hidden tree stays valid and the
//! drop resumes where it stopped. `tests/bulk_load.rs` crashes at each
//! step and checks both outcomes.
//!
//! # Log space
//!
//! Each mtr's pages are bounded ([`leaf_write_pages`],
//! `discard::drop_step_pages`) and must fit what one writer may reserve
//! (`Admission::max_mtr_pages`). A load does not grow its hidden tree
//! beyond the level at which a split or merge of the published table
//! (`btree::pessimistic_pages`, which is more than a leaf write needs)
//! would not fit: it fails with `Error::Config` instead, naming the log.
//! A drop step frees fewer children at a time when the log (or the buffer
//! pool) is small. The smallest drop step of a tree a load could build
//! (its right edge, one child, the header: `top + 2` pages) always fits
//! the log that built it, so the open that finishes an unfinished load
//! never waits for log space it cannot get.
//!
//! # Concurrency
//!
//! The builder latches pages of the hidden tree, top-down along its right
//! edge, then the space header to allocate (as every tree operation does:
//! tree pages first, the header last); at begin and publish it latches the
//! table's root first, then the hidden root, then the header. Nothing else
//! latches a hidden-tree page while holding another (the cleaners flush
//! its pages with their own short latches; readers and writers of the
//! table cannot reach it), so no thread waits for the builder while the
//! builder waits for it. Each mtr reserves its redo bound and passes the
//! writers' pacer before it latches anything, so between mtrs the builder
//! holds no latch and waits for log space like any writer; the bound is
//! checked against the mtr's real size when it commits (`Mtr::commit`). Writes to the table while it loads go into
//! the empty root as usual, and may split it (the mark stays, whatever the
//! root's level, so a crash then still finds the hidden tree); the publish
//! then finds the root no longer an empty leaf and fails with
//! [`Error::BulkLoad`] (the hidden tree dropped, the table keeping the
//! concurrent writes): a bulk load never overwrites rows it did not load.

mod discard;

#[cfg(test)]
pub(crate) use discard::drop_step_pages;
#[cfg(test)]
pub(crate) use discard::owns_nothing;
pub(crate) use discard::{drop_hidden, empty_tree, FreeValue};

use super::node::{
    self, internal_cell, shortest_separator, NodeMut, NodeRef, LEAF_CELL_HEADER, SLOT_SIZE,
};
use super::BTree;
use crate::buffer::PageWrite;
use crate::engine::admission::Purpose;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::mtr::{mtr_bound, Mtr};
use crate::page::{set_page_type, PageId, PageType, PAGE_HEADER_SIZE};

/// Most pages the mtr writing a leaf into a hidden tree whose root is at
/// level `top` changes: the right edge (the hidden root and the last node
/// of each level below it, at least one page), a new page per level whose
/// last node is full, one for the root's growth and the leaf itself, and
/// the space header: `max(top, 1) + (top + 2) + 1 ≤ 2 (top + 2)`.
pub(crate) const fn leaf_write_pages(top: u8) -> usize {
    2 * (top as usize + 2)
}

/// Bytes of cells and slots a built node may hold at `fill_factor` percent:
/// InnoDB's `innodb_fill_factor`, where 100 still leaves 1/16 of the page
/// free for rows that grow later. A node goes past it only by what it must
/// hold whatever the fill factor, judged on the cells really placed: a
/// leaf takes at least one entry ([`BulkLoad::push`]), a node above the
/// leaves at least [`MIN_SEPARATORS`] separators (`link_leaf`). Both fit
/// any page: an entry and two separators of the largest size take at most
/// half a page each (`node`'s size assertions).
pub(crate) fn fill_bytes(page_size: usize, fill_factor: u8) -> usize {
    let usable = node::usable_bytes(page_size);
    let cap = usable - usable / 16;
    let want = usable * usize::from(fill_factor.clamp(10, 100)) / 100;
    want.min(cap)
}

/// Separators a right-edge node takes whatever the fill factor: when it is
/// full it gives its last child (and that child's separator) to a new right
/// neighbour, and must keep a separator of its own.
const MIN_SEPARATORS: usize = 2;

/// A bulk load in progress into one tree (see the module doc).
pub(crate) struct BulkLoad<'e> {
    e: &'e Engine,
    /// The table's name, for errors.
    table: String,
    target: PageId,
    hidden: PageId,
    ps: usize,
    fill: usize,
    /// The leaf being filled, outside the buffer pool.
    leaf: Vec<u8>,
    /// First key of `leaf` (valid when it has cells).
    leaf_first: Vec<u8>,
    /// Last key added; the next must be greater.
    last: Option<Vec<u8>>,
    /// Last key of the last leaf written.
    prev_last: Vec<u8>,
    /// Leaves written so far.
    leaves: u64,
    /// Level of the hidden root.
    top: u8,
    /// `right[l]`: page number of the last node at level `l < top`.
    right: Vec<u32>,
    rows: u64,
    /// Whether the hidden tree is still to be dropped on failure.
    open: bool,
    /// Frees what a loaded value owns when the hidden tree is dropped.
    free_value: FreeValue,
}

impl<'e> BulkLoad<'e> {
    /// Start loading into `tree`, which must be empty (step 1 of the
    /// module doc).
    pub fn begin(
        e: &'e Engine,
        tree: BTree,
        table: &str,
        fill_factor: u8,
        free_value: FreeValue,
    ) -> Result<Self> {
        let ps = e.page_size();
        let budget = e.adm.budget(Purpose::New);
        budget.ensure(mtr_bound(3, ps))?;
        let mut mtr = Mtr::new(e, &budget);
        let mut root = e.pool.write(tree.root())?;
        super::descend::expect_node(&root, tree.root(), None)?;
        let r = NodeRef::new(&root);
        if r.pending_bulk().is_some() {
            return Err(refused(table, "another bulk load into it is under way"));
        }
        if !r.is_leaf() || r.n_cells() > 0 {
            return Err(refused(
                table,
                "the table is not empty (it has rows, or delete marks an open read view may \
                 still see: retry once that view ends)",
            ));
        }
        let mut hidden = mtr.alloc_page(PageType::BtreeLeaf)?;
        BTree::init_root(&mut hidden);
        let hidden_id = hidden.id();
        NodeMut::new(&mut root).set_pending_bulk(Some(hidden_id.page_no));
        mtr.keep(hidden);
        mtr.keep(root);
        mtr.commit()?;
        let mut leaf = vec![0u8; ps];
        NodeMut::init(&mut leaf, 0, 0);
        Ok(BulkLoad {
            e,
            table: table.to_string(),
            target: tree.root(),
            hidden: hidden_id,
            ps,
            fill: fill_bytes(ps, fill_factor),
            leaf,
            leaf_first: Vec::new(),
            last: None,
            prev_last: Vec::new(),
            leaves: 0,
            top: 0,
            right: Vec::new(),
            rows: 0,
            open: true,
            free_value,
        })
    }

    /// Leaves written so far, and the hidden root (for tests).
    #[cfg(test)]
    pub(super) fn progress(&self) -> (u64, PageId) {
        (self.leaves, self.hidden)
    }

    /// Stop without dropping what was built, as a crash would; returns the
    /// hidden root (for tests of the drop).
    #[cfg(test)]
    pub(super) fn leave_for_test(mut self) -> PageId {
        self.open = false;
        self.hidden
    }

    /// Add the next row; its key must be greater than the previous one.
    pub fn push(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        node::check_entry(self.ps, key, value)?;
        if let Some(last) = &self.last {
            if key <= last.as_slice() {
                return Err(Error::BulkLoad {
                    table: self.table.clone(),
                    reason: format!(
                        "keys must be strictly ascending: {} after {}",
                        show_key(key),
                        show_key(last)
                    ),
                });
            }
        }
        let need = LEAF_CELL_HEADER + key.len() + value.len() + SLOT_SIZE;
        let used = NodeRef::new(&self.leaf).used_bytes();
        if used > 0 && used + need > self.fill {
            self.write_leaf()?;
        }
        let mut n = NodeMut::new(&mut self.leaf);
        if n.as_ref().n_cells() == 0 {
            self.leaf_first.clear();
            self.leaf_first.extend_from_slice(key);
        }
        if !n.append_leaf(key, value) {
            return Err(Error::Corruption(format!(
                "bulk load into `{}`: an entry of {} bytes does not fit an empty leaf",
                self.table, need
            )));
        }
        let last = self.last.get_or_insert_with(Vec::new);
        last.clear();
        last.extend_from_slice(key);
        self.rows += 1;
        Ok(())
    }

    /// Write the last leaf and publish the tree (step 3); returns the rows
    /// loaded and the publishing mtr's LSN (0 if nothing was loaded).
    #[cfg(test)]
    pub fn finish(self) -> Result<(u64, crate::page::Lsn)> {
        self.finish_with(|_| Ok(()))
    }

    /// [`BulkLoad::finish`], with `publishing` run inside the publishing
    /// mtr after the tree's pages are latched and before the space header
    /// is (so it may latch pages that come before the header in the latch
    /// order: the overflow directory, whose slot the load clears there).
    pub fn finish_with(
        mut self,
        publishing: impl for<'m> FnOnce(&mut Mtr<'m>) -> Result<()>,
    ) -> Result<(u64, crate::page::Lsn)> {
        if NodeRef::new(&self.leaf).n_cells() > 0 {
            self.write_leaf()?;
        }
        if self.leaves == 0 {
            self.open = false;
            drop_hidden(self.e, self.target, self.hidden, self.free_value)?;
            return Ok((0, 0));
        }
        let e = self.e;
        e.failpoints.hit("bulk.publish");
        let budget = e.adm.budget(Purpose::New);
        budget.ensure(mtr_bound(3, self.ps))?;
        let mut mtr = Mtr::new(e, &budget);
        let mut root = e.pool.write(self.target)?;
        let r = NodeRef::new(&root);
        if r.pending_bulk() != Some(self.hidden.page_no) || !r.is_leaf() || r.n_cells() > 0 {
            drop(root);
            drop(mtr);
            return Err(refused(
                &self.table,
                "rows were written into the table while it loaded; the loaded rows were discarded",
            ));
        }
        let hidden = e.pool.write(self.hidden)?;
        super::descend::expect_node(&hidden, self.hidden, Some(self.top))?;
        publishing(&mut mtr)?;
        // Freeing the hidden root latches page 0: read it before the root
        // changes. (Were the publish to fail after all, dropping the mtr
        // puts the root back: `open` stays set, and the drop below frees
        // pages that are still the hidden tree's alone.)
        mtr.latch_header()?;
        copy_node(&mut root, &hidden);
        // The mark is outside the node: copying did not clear it.
        NodeMut::new(&mut root).set_pending_bulk(None);
        mtr.keep(root);
        mtr.free_page(hidden)?;
        let lsn = mtr.commit()?;
        self.open = false;
        Ok((self.rows, lsn))
    }

    /// Write the filled leaf into a new page and link it into the right
    /// edge, in one mtr (step 2).
    fn write_leaf(&mut self) -> Result<()> {
        let e = self.e;
        e.failpoints.hit("bulk.leaf");
        e.adm.pace()?;
        let budget = e.adm.budget(Purpose::New);
        let budget_pages = leaf_write_pages(self.top);
        budget.ensure(mtr_bound(budget_pages, self.ps))?;
        let mut mtr = Mtr::new(e, &budget);
        let mut held: Vec<PageWrite<'_>> = Vec::new();
        if self.leaves == 0 {
            // The first leaf is the hidden root itself.
            let mut root = e.pool.write(self.hidden)?;
            copy_node(&mut root, &self.leaf);
            held.push(root);
        } else {
            // What the right edge was: a write that fails half-way (an
            // allocation or a read after the root grew, or a node split)
            // leaves it as it was. Its pages go back as they were when the
            // guards and the mtr are dropped unlogged (`mtr`'s module doc):
            // the tree's as they were, the new ones back on the free list or
            // out of the pool.
            let saved = (self.top, self.right.clone());
            if let Err(err) = self.link_leaf(&mut mtr, &mut held) {
                (self.top, self.right) = saved;
                drop(held);
                drop(mtr);
                return Err(err);
            }
        }
        for p in held {
            mtr.keep(p);
        }
        mtr.commit()?;
        self.leaves += 1;
        self.prev_last.clear();
        if let Some(last) = &self.last {
            self.prev_last.extend_from_slice(last);
        }
        NodeMut::init(&mut self.leaf, 0, 0);
        Ok(())
    }

    /// The body of [`Self::write_leaf`] for every leaf but the first: latch
    /// the right edge top-down, allocate the leaf, add its separator.
    /// Every page touched ends in `held`.
    fn link_leaf<'m>(&mut self, mtr: &mut Mtr<'m>, held: &mut Vec<PageWrite<'m>>) -> Result<()>
    where
        'e: 'm,
    {
        let e: &'m Engine = self.e;
        let space = self.hidden.space;
        // path[l] = index in `held` of the right-edge node at level l >= 1.
        let mut path: Vec<usize> = vec![usize::MAX; usize::from(self.top) + 1];
        held.push(e.pool.write(self.hidden)?);
        path[usize::from(self.top)] = 0;
        for l in (1..usize::from(self.top)).rev() {
            let id = PageId::new(space, self.right[l]);
            let p = e.pool.write(id)?;
            super::descend::expect_node(&p, id, Some(l as u8))?;
            path[l] = held.len();
            held.push(p);
        }
        if self.top == 0 {
            // The hidden root is the first leaf: move it down a level.
            self.grow(mtr, held, &mut path)?;
        }
        let mut leaf = mtr.alloc_page(PageType::BtreeLeaf)?;
        copy_node(&mut leaf, &self.leaf);
        let mut child = leaf.id().page_no;
        held.push(leaf);
        self.right[0] = child;
        let mut sep = shortest_separator(&self.prev_last, &self.leaf_first);
        let mut level = 1usize;
        loop {
            let cell = internal_cell(&sep, child);
            let at = path[level];
            let n = NodeRef::new(&held[at]);
            if n.used_bytes() + cell.len() + SLOT_SIZE <= self.fill || n.n_cells() < MIN_SEPARATORS
            {
                let i = n.n_cells();
                if !NodeMut::new(&mut held[at]).insert_cell(i, &cell) {
                    return Err(Error::Corruption(format!(
                        "bulk load into `{}`: a separator does not fit a node judged to have room",
                        self.table
                    )));
                }
                return Ok(());
            }
            if level == usize::from(self.top) {
                self.grow(mtr, held, &mut path)?;
            }
            // The right-edge node is full: a new right neighbour starts
            // with its last child and the new one, and the last cell's key
            // goes up as the neighbour's separator.
            let at = path[level];
            let (up_key, moved) = {
                let n = NodeRef::new(&held[at]);
                let last = n.n_cells() - 1;
                (n.key(last).to_vec(), n.child(last + 1))
            };
            {
                let mut full = NodeMut::new(&mut held[at]);
                let last = full.as_ref().n_cells() - 1;
                full.remove_cell(last);
            }
            let mut next = mtr.alloc_page(PageType::BtreeInternal)?;
            let mut m = NodeMut::init(&mut next, level as u8, moved);
            if !m.insert_cell(0, &cell) {
                return Err(Error::Corruption(format!(
                    "bulk load into `{}`: a separator does not fit an empty node",
                    self.table
                )));
            }
            let next_no = next.id().page_no;
            self.right[level] = next_no;
            path[level] = held.len();
            held.push(next);
            sep = up_key;
            child = next_no;
            level += 1;
        }
    }

    /// Grow the hidden tree one level: the hidden root's content moves into
    /// a new page, which becomes the right edge one level below the root
    /// (as a root split does, the root keeping its page). Refused, before
    /// anything changes, when a split or merge in a tree that high would
    /// not fit one mtr of this log: the table would take no more writes.
    fn grow<'m>(
        &mut self,
        mtr: &mut Mtr<'m>,
        held: &mut Vec<PageWrite<'m>>,
        path: &mut Vec<usize>,
    ) -> Result<()>
    where
        'e: 'm,
    {
        let (need, max) = (
            super::pessimistic_pages(self.top + 1),
            self.e.adm.max_mtr_pages(self.ps),
        );
        if need > max {
            return Err(Error::config(
                "log_file_size",
                format!(
                    "bulk load into `{}`: a tree of {} levels needs mini-transactions of {need} \
                     pages of {} bytes (page_size), and the redo log takes at most {max} in one",
                    self.table,
                    self.top + 2,
                    self.ps
                ),
            ));
        }
        let top = usize::from(self.top);
        let root_at = path[top];
        let t = if top == 0 {
            PageType::BtreeLeaf
        } else {
            PageType::BtreeInternal
        };
        let mut moved = mtr.alloc_page(t)?;
        copy_node(&mut moved, &held[root_at]);
        let moved_no = moved.id().page_no;
        NodeMut::init(&mut held[root_at], self.top + 1, moved_no);
        if self.right.len() <= top {
            self.right.resize(top + 1, 0);
        }
        self.right[top] = moved_no;
        path[top] = held.len();
        held.push(moved);
        path.push(root_at);
        self.top += 1;
        Ok(())
    }
}

impl Drop for BulkLoad<'_> {
    fn drop(&mut self) {
        if self.open {
            // A failed or abandoned load: drop what it built (on error the
            // next open finishes the job).
            if let Err(err) = drop_hidden(self.e, self.target, self.hidden, self.free_value) {
                log::warn!(
                    "bulk load into `{}` failed and its pages could not be freed now \
                     (the next open frees them): {err}",
                    self.table
                );
            }
        }
    }
}

/// Copy a node image's content (everything after the common page header)
/// into `dst`, setting its page type from the level.
pub(super) fn copy_node(dst: &mut [u8], src: &[u8]) {
    let t = if NodeRef::new(src).is_leaf() {
        PageType::BtreeLeaf
    } else {
        PageType::BtreeInternal
    };
    set_page_type(dst, t);
    dst[PAGE_HEADER_SIZE..].copy_from_slice(&src[PAGE_HEADER_SIZE..]);
}

pub(super) fn refused(table: &str, reason: &str) -> Error {
    Error::BulkLoad {
        table: table.to_string(),
        reason: reason.to_string(),
    }
}

/// A key for an error message: text if it is printable, else hex.
fn show_key(k: &[u8]) -> String {
    let k = &k[..k.len().min(64)];
    match std::str::from_utf8(k) {
        Ok(s) if s.chars().all(|c| !c.is_control()) => format!("{s:?}"),
        _ => k.iter().map(|b| format!("{b:02x}")).collect(),
    }
}
