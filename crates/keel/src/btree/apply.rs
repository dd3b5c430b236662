//! Applying a planned structural change to latched pages.
//!
//! A plan names pages by index into one list (the writer's path, then
//! siblings, then newly allocated pages) and says which receive a new image
//! and which are freed. Planning did every read and allocation; from here on
//! only `free_page` can fail, and it runs after the tree no longer refers to
//! the freed pages.

use super::buf::NodeBuf;
use crate::buffer::PageWrite;
use crate::error::Result;
use crate::mtr::Mtr;
use crate::page::PageType;

/// What to do with the latched pages of one operation.
#[derive(Default)]
pub(super) struct Plan {
    /// New node images, by page index.
    pub writes: Vec<(usize, NodeBuf)>,
    /// Pages that leave the tree, by page index.
    pub frees: Vec<usize>,
}

/// Write the images, hand the pages to the mtr, free the unlinked pages, and
/// commit. Pages neither written nor freed were only looked at and are
/// released unchanged.
pub(super) fn apply<'a>(mut mtr: Mtr<'a>, pages: Vec<PageWrite<'a>>, plan: Plan) -> Result<()> {
    let mut pages: Vec<Option<PageWrite<'a>>> = pages.into_iter().map(Some).collect();
    for (i, img) in &plan.writes {
        match pages[*i].as_mut() {
            Some(p) => img.write_to(p),
            None => unreachable!("plan writes page {i} twice"),
        }
    }
    for (i, _) in &plan.writes {
        if let Some(p) = pages[*i].take() {
            mtr.keep(p);
        }
    }
    let mut freed = Ok(());
    for i in plan.frees {
        if let Some(p) = pages[i].take() {
            if freed.is_ok() {
                // After an error the remaining pages leak: still unreachable
                // from the tree, so the tree itself stays consistent.
                freed = mtr.free_page(p);
            }
        }
    }
    drop(pages);
    mtr.commit()?;
    freed
}

/// Allocate a page for a node at `level`.
pub(super) fn alloc_node<'a>(mtr: &mut Mtr<'a>, level: u8) -> Result<PageWrite<'a>> {
    let t = if level == 0 {
        PageType::BtreeLeaf
    } else {
        PageType::BtreeInternal
    };
    mtr.alloc_page(t)
}

/// Undo the allocations of a plan that failed half-way, release everything
/// and commit, so the space's allocation state stays consistent. The error
/// that stopped the plan is what the caller reports.
pub(super) fn abandon<'a>(mut mtr: Mtr<'a>, held: Vec<PageWrite<'a>>, new: Vec<PageWrite<'a>>) {
    drop(held);
    for p in new {
        if let Err(err) = mtr.free_page(p) {
            log::warn!("b-tree: page allocated for an abandoned split leaks: {err}");
        }
    }
    if let Err(err) = mtr.commit() {
        log::warn!("b-tree: committing an abandoned split failed: {err}");
    }
}
