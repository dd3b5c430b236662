//! The full check of the undo lists, over any source of pages (the buffer
//! pool of a running engine, or the data files as they stand, for
//! `keel check --read-only`).

use std::collections::HashSet;

use super::{check_dir, decode, dir_slot, page_head, RollPtr, N_RSEGS, RECORDS_START};
use crate::btree::Pages;
use crate::error::{Error, Result};
use crate::page::PageId;

/// What a check of the undo lists found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UndoCheck {
    /// Undo pages in the lists (the directory page not counted).
    pub pages: u64,
    /// Records in them, purged or not.
    pub records: u64,
    /// Records not yet purged.
    pub unpurged: u64,
    /// Of those, the first records of their commit: the history length.
    pub first_unpurged: u64,
    /// Each rseg's tail page (0 = empty list).
    pub tails: Vec<u32>,
    /// The roll pointers (as numbers: page number × 2¹⁶ + offset) of the
    /// unpurged records, for checking that a row points into live undo.
    pub live: HashSet<u64>,
}

/// Walk every rseg's list from the directory page `dir`: page types and
/// identities, links (no page reached twice, the list ends at the slot's
/// last page), each record's framing, `purged ≤ used` on a record
/// boundary, every record's commit at most the page's `max_commit`.
///
/// On a running engine the lists must not change meanwhile (see
/// `UndoSpace::check`, which holds every rseg's mutexes); pages are read
/// one at a time, each under a shared latch.
pub(crate) fn check_lists<P: Pages>(pages: &P, dir: PageId) -> Result<UndoCheck> {
    check_lists_visiting(pages, dir, &mut |_, _| {})
}

/// [`check_lists`], calling `visit` with the table (root page) and old
/// value of every unpurged record that keeps one whole (not absent, not a
/// delta).
pub(crate) fn check_lists_visiting<P: Pages>(
    pages: &P,
    dir: PageId,
    visit: &mut dyn FnMut(u32, &[u8]),
) -> Result<UndoCheck> {
    let slots: Vec<(u32, u32)> = {
        let d = pages.page(dir)?;
        check_dir(&d, dir)?;
        (0..N_RSEGS).map(|i| dir_slot(&d, i)).collect()
    };
    let mut c = UndoCheck::default();
    let mut seen = HashSet::new();
    seen.insert(dir.page_no);
    for (rseg, &(first, last)) in slots.iter().enumerate() {
        if (first == 0) != (last == 0) {
            return Err(Error::Corruption(format!(
                "undo directory {dir}: rseg {rseg} runs from page {first} to page {last}"
            )));
        }
        let mut no = first;
        let mut prev = 0;
        while no != 0 {
            if !seen.insert(no) {
                return Err(Error::Corruption(format!(
                    "undo rseg {rseg}: page {no} (after page {prev}) is reached twice"
                )));
            }
            let id = PageId::new(dir.space, no);
            let p = pages.page(id)?;
            page_one(&p, id, &mut c, visit)?;
            c.pages += 1;
            prev = no;
            no = page_head(&p, id)?.next;
        }
        if prev != last {
            return Err(Error::Corruption(format!(
                "undo directory {dir}: rseg {rseg}'s last page is {last}, its list ends at {prev}"
            )));
        }
        c.tails.push(last);
    }
    Ok(c)
}

/// Check the records of undo page `id` and count them into `c`.
fn page_one(
    p: &[u8],
    id: PageId,
    c: &mut UndoCheck,
    visit: &mut dyn FnMut(u32, &[u8]),
) -> Result<()> {
    let h = page_head(p, id)?;
    let mut off = RECORDS_START;
    let mut boundary = h.purged == RECORDS_START;
    while off < h.used {
        let (rec, end) = decode(p, id, off, h.used)?;
        if rec.commit > h.max_commit {
            return Err(Error::Corruption(format!(
                "undo page {id}, record at offset {off}: commit {} is above the page's \
                 max_commit {}",
                rec.commit, h.max_commit
            )));
        }
        c.records += 1;
        if off >= h.purged {
            c.unpurged += 1;
            c.first_unpurged += u64::from(rec.first);
            c.live.insert(RollPtr::new(id.page_no, off as u16).raw());
            // A delta is no whole version, and never a large one
            // (`txn::version::undo_delta`): it names no chain.
            if let Some(old) = rec.old.filter(|_| !rec.delta) {
                visit(rec.root, old);
            }
        }
        off = end;
        boundary |= off == h.purged;
    }
    if !boundary {
        return Err(Error::Corruption(format!(
            "undo page {id}: purged offset {} is not at a record boundary",
            h.purged
        )));
    }
    Ok(())
}

/// [`check_lists`] from the directory the space header (page 0 of
/// `space`) names; `None` for a space laid out before undo existed.
pub(crate) fn check_space<P: Pages>(pages: &P, space: u32) -> Result<Option<UndoCheck>> {
    check_space_visiting(pages, space, &mut |_, _| {})
}

/// [`check_space`] with [`check_lists_visiting`]'s `visit`.
pub(crate) fn check_space_visiting<P: Pages>(
    pages: &P,
    space: u32,
    visit: &mut dyn FnMut(u32, &[u8]),
) -> Result<Option<UndoCheck>> {
    let dir = {
        let h = pages.page(PageId::new(space, 0))?;
        crate::page::get_u32(&h, crate::engine::space_header::UNDO_DIR)
    };
    if dir == 0 {
        return Ok(None);
    }
    check_lists_visiting(pages, PageId::new(space, dir), visit).map(Some)
}
