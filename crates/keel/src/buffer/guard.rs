//! Page guards: a fixed frame with its latch held. Dropping one releases the
//! latch and unfixes the frame.

use std::ops::{Deref, DerefMut};

use parking_lot::{RwLockReadGuard, RwLockWriteGuard};

use super::frame::Frame;
use crate::io::AlignedBuf;
use crate::page::PageId;

/// A page under its shared latch.
pub struct PageRead<'a> {
    id: PageId,
    frame: &'a Frame,
    guard: Option<RwLockReadGuard<'a, AlignedBuf>>,
}

/// A page under its exclusive latch.
pub struct PageWrite<'a> {
    id: PageId,
    frame: &'a Frame,
    guard: Option<RwLockWriteGuard<'a, AlignedBuf>>,
}

impl<'a> PageRead<'a> {
    pub(crate) fn new(id: PageId, frame: &'a Frame, g: RwLockReadGuard<'a, AlignedBuf>) -> Self {
        PageRead {
            id,
            frame,
            guard: Some(g),
        }
    }

    /// The page's identity.
    pub fn id(&self) -> PageId {
        self.id
    }
}

impl<'a> PageWrite<'a> {
    pub(crate) fn new(id: PageId, frame: &'a Frame, g: RwLockWriteGuard<'a, AlignedBuf>) -> Self {
        PageWrite {
            id,
            frame,
            guard: Some(g),
        }
    }

    /// The page's identity.
    pub fn id(&self) -> PageId {
        self.id
    }

    pub(crate) fn frame(&self) -> &'a Frame {
        self.frame
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
            Some(g) => g,
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
