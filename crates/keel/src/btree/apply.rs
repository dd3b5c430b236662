//! Applying a planned structural change to latched pages.
//!
//! A plan names pages by index into one list (the writer's path, then
//! siblings, then newly allocated pages) and says which receive a new image
//! and which are freed. Planning did every read and allocation; the space
//! header, which freeing changes, is latched before the first image is
//! written, so nothing after that reads a page. Should anything fail all
//! the same, the mtr is dropped uncommitted, which puts every page back as
//! it was (`mtr`'s module doc): the operation changes everything or nothing.

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
    if !plan.frees.is_empty() {
        mtr.latch_header()?;
    }
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
    for i in plan.frees {
        if let Some(p) = pages[i].take() {
            mtr.free_page(p)?;
        }
    }
    drop(pages);
    mtr.commit()?;
    Ok(())
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
