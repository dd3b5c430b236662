//! Page guards: a fixed frame with its latch held. Dropping one releases the
//! latch and unfixes the frame.

use std::ops::{Deref, DerefMut};

use parking_lot::{RwLockReadGuard, RwLockWriteGuard};

use super::frame::Frame;
use crate::io::AlignedBuf;
use crate::page::PageId;

/// A page under its shared latch.
pub struct PageRead<'a> {
    frame: &'a Frame,
    guard: Option<RwLockReadGuard<'a, AlignedBuf>>,
}

/// A page under its exclusive latch. The first mutable access keeps a copy
/// of the page as it was, so that the mini-transaction can log exactly the
/// bytes it changed.
pub struct PageWrite<'a> {
    id: PageId,
    frame: &'a Frame,
    guard: Option<RwLockWriteGuard<'a, AlignedBuf>>,
    before: Option<Box<[u8]>>,
    zeroed: bool,
}

impl<'a> PageRead<'a> {
    pub(crate) fn new(frame: &'a Frame, g: RwLockReadGuard<'a, AlignedBuf>) -> Self {
        PageRead {
            frame,
            guard: Some(g),
        }
    }
}

impl<'a> PageWrite<'a> {
    pub(crate) fn new(
        id: PageId,
        frame: &'a Frame,
        g: RwLockWriteGuard<'a, AlignedBuf>,
        zeroed: bool,
    ) -> Self {
        PageWrite {
            id,
            frame,
            guard: Some(g),
            before: None,
            zeroed,
        }
    }

    /// The byte ranges changed since the page was latched, and whether it
    /// started from zeros (a fresh page). None when nothing was changed.
    pub(crate) fn changes(&self) -> Option<(bool, Vec<(usize, usize)>)> {
        let now: &[u8] = self;
        if self.zeroed {
            let zeros = vec![0u8; now.len()];
            return Some((true, crate::redo::format::diff_ranges(&zeros, now)));
        }
        let before = self.before.as_deref()?;
        let r = crate::redo::format::diff_ranges(before, now);
        (!r.is_empty()).then_some((false, r))
    }

    /// The page's identity.
    pub fn id(&self) -> PageId {
        self.id
    }

    /// Put the page back as it was when latched (zeros for a fresh page):
    /// its mini-transaction could not log the change.
    pub(crate) fn undo_changes(&mut self) {
        if let Some(g) = self.guard.as_mut() {
            if self.zeroed {
                g.fill(0);
            } else if let Some(before) = self.before.take() {
                g.copy_from_slice(&before);
            }
        }
    }

    pub(crate) fn frame(&self) -> &'a Frame {
        self.frame
    }

    /// The page's bytes for a change that needs no redo of its own: redo
    /// replaying a change the log already holds, or the page LSN that
    /// `BufferPool::mark_dirty` sets once the change is logged. Unlike
    /// the mutable deref it keeps no copy of the page as it was (a page
    /// copy per replayed record was most of recovery's memory traffic), so
    /// [`PageWrite::changes`] does not see what is changed through it.
    pub(crate) fn unlogged_mut(&mut self) -> &mut [u8] {
        match &mut self.guard {
            Some(g) => g,
            None => unreachable!("page guard used after release"),
        }
    }
}

impl Deref for PageRead<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.guard {
            Some(g) => g,
            None => unreachable!("page guard used after release"),
        }
    }
}

impl Deref for PageWrite<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.guard {
            Some(g) => g,
            None => unreachable!("page guard used after release"),
        }
    }
}

impl DerefMut for PageWrite<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.guard {
            Some(g) => {
                if self.before.is_none() && !self.zeroed {
                    self.before = Some(Box::from(&g[..]));
                }
                g
            }
            None => unreachable!("page guard used after release"),
        }
    }
}

impl Drop for PageRead<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        self.frame.unfix();
    }
}

impl Drop for PageWrite<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        self.frame.unfix();
    }
}
