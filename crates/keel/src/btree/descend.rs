//! Latch-coupled descents from the root to a leaf.
//!
//! Every descent takes the child's latch before releasing the parent's, and
//! only ever moves downward, so descents cannot deadlock with each other.

use super::node::{self, NodeRef};
use crate::buffer::{PageRead, PageWrite};
use crate::engine::admission::Budget;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::page::{page_id, page_type, PageId, PageType};

/// Cheap sanity check of a node reached by a descent: identity, type and
/// level as the parent promised, header fields in range. The full node check
/// is `node::check`; this one keeps every access of the descent in bounds of
/// the header and slot array.
pub(crate) fn expect_node(b: &[u8], id: PageId, level: Option<u8>) -> Result<()> {
    let r = NodeRef::new(b);
    let want = if r.is_leaf() {
        PageType::BtreeLeaf
    } else {
        PageType::BtreeInternal
    };
    let found = page_type(b);
    let bad = |what: String| Err(Error::Corruption(format!("b-tree page {id}: {what}")));
    if page_id(b) != id {
        return bad(format!("header names page {}", page_id(b)));
    }
    if found != Some(want) {
        return bad(format!("type {found:?} at level {}", r.level()));
    }
    if let Some(l) = level {
        if r.level() != l {
            return bad(format!(
                "parent expects level {l}, page is at {}",
                r.level()
            ));
        }
    }
    let slot_end = node::NODE_HEADER_END + node::SLOT_SIZE * r.n_cells();
    if r.content_start() > b.len() || slot_end > r.content_start() {
        return bad(format!(
            "{} slots do not fit before the content start {}",
            r.n_cells(),
            r.content_start()
        ));
    }
    Ok(())
}

/// Descend with shared latches; `choose` picks the child position at each
/// internal node. Returns the leaf, still latched. The root and internal
/// nodes are read through the pool's guesses of their frames
/// ([`crate::buffer::BufferPool::read_hot`]), the leaf through its page hash.
pub(super) fn descend_read<'a>(
    e: &'a Engine,
    root: PageId,
    mut choose: impl FnMut(NodeRef<'_>) -> usize,
) -> Result<PageRead<'a>> {
    let mut page = e.pool.read_hot(root)?;
    expect_node(&page, root, None)?;
    loop {
        let n = NodeRef::new(&page);
        if n.is_leaf() {
            return Ok(page);
        }
        let level = n.level();
        let id = PageId::new(root.space, n.child(choose(n)));
        let child = read_child(e, id, level)?;
        expect_node(&child, id, Some(level - 1))?;
        page = child;
    }
}

/// The optimistic writer's descent: shared latches down to the leaf's
/// parent, the exclusive latch on the leaf. `None` when the root turned from
/// leaf into internal node between our two latches on it (the caller falls
/// back to the pessimistic path).
pub(super) fn leaf_for_write<'a>(
    e: &'a Engine,
    root: PageId,
    key: &[u8],
) -> Result<Option<PageWrite<'a>>> {
    let mut page = e.pool.read_hot(root)?;
    expect_node(&page, root, None)?;
    if NodeRef::new(&page).is_leaf() {
        drop(page);
        let w = e.pool.write(root)?;
        expect_node(&w, root, None)?;
        return Ok(NodeRef::new(&w).is_leaf().then_some(w));
    }
    loop {
        let n = NodeRef::new(&page);
        let level = n.level();
        let id = PageId::new(root.space, n.child(n.child_pos(key)));
        if level == 1 {
            let leaf = e.pool.write(id)?;
            expect_node(&leaf, id, Some(0))?;
            return Ok(Some(leaf));
        }
        let child = read_child(e, id, level)?;
        expect_node(&child, id, Some(level - 1))?;
        page = child;
    }
}

/// The child `id` of a node at `level`, latched shared: an internal node,
/// read by every descent that passes it, through the pool's guess of its
/// frame; a leaf, one of many, through the page hash.
fn read_child(e: &Engine, id: PageId, level: u8) -> Result<PageRead<'_>> {
    if level > 1 {
        e.pool.read_hot(id)
    } else {
        e.pool.read(id)
    }
}

/// Pages held exclusively by a pessimistic writer: a contiguous piece of the
/// root-to-leaf path, from the lowest "safe" node (or the root) to the leaf.
pub(super) struct Path<'a> {
    pub pages: Vec<PageWrite<'a>>,
    /// `pos[i]`: position of `pages[i]` among its parent's children
    /// (meaningless for `pages[0]`).
    pub pos: Vec<usize>,
    /// Whether `pages[0]` is the root.
    pub top_is_root: bool,
}

impl Path<'_> {
    pub fn leaf(&self) -> &[u8] {
        self.pages.last().map_or(&[], |p| &p[..])
    }
}

/// The pessimistic writer's descent: exclusive latches from the root down;
/// whenever a child is `safe` (the operation cannot propagate above it) all
/// its ancestors are released.
///
/// Once the root is latched, the tree's height is known and cannot change
/// while the latch is held, so neither can the most pages the operation may
/// change ([`super::pessimistic_pages`]). If `budget` does not cover their
/// redo and cannot be topped up without waiting, the root is released, the
/// budget waits for log space (holding nothing), and the descent restarts.
pub(super) fn descend_write<'a>(
    e: &'a Engine,
    budget: &Budget<'_>,
    root: PageId,
    key: &[u8],
    safe: impl Fn(NodeRef<'_>) -> bool,
) -> Result<Path<'a>> {
    let top = loop {
        let top = e.pool.write(root)?;
        expect_node(&top, root, None)?;
        let need = super::pessimistic_bound(NodeRef::new(&top).level(), e.page_size());
        if budget.try_ensure(need) {
            break top;
        }
        drop(top);
        budget.ensure(need)?;
    };
    let mut path = Path {
        pages: vec![top],
        pos: vec![0],
        top_is_root: true,
    };
    loop {
        let (id, pos, level) = match path.pages.last() {
            Some(p) => {
                let n = NodeRef::new(p);
                if n.is_leaf() {
                    return Ok(path);
                }
                let pos = n.child_pos(key);
                (PageId::new(root.space, n.child(pos)), pos, n.level())
            }
            None => unreachable!("a path always holds at least one page"),
        };
        let child = e.pool.write(id)?;
        expect_node(&child, id, Some(level - 1))?;
        if safe(NodeRef::new(&child)) {
            path.pages.clear();
            path.pos.clear();
            path.top_is_root = false;
        }
        path.pages.push(child);
        path.pos.push(pos);
    }
}
