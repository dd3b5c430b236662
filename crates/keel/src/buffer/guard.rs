//! Page guards: a fixed frame with its latch held. Dropping one releases the
//! latch and unfixes the frame.
//!
//! An exclusive guard is also the page's undo: it keeps the page as it was
//! when latched (a copy taken at the first mutable access, or "zeros" for a
//! page created fresh), and until its change is logged
//! ([`PageWrite::keep_changes`], which `BufferPool::mark_dirty` calls) a
//! guard that is dropped puts the page back as it was *before* it releases
//! the latch; a fresh page also leaves the pool. So a change whose redo was
//! never appended (an early return, an error, a panic unwinding) is seen by
//! no other thread and outlives nothing: whoever latches the page next sees
//! it as it was.
//!
//! The copies come from a small per-thread stash of page-sized buffers and
//! go back to it when the guard is done with them ([`page_copy`],
//! [`recycle`]): a transaction changes a handful of pages, each a copy, and
//! allocating and freeing 16 KiB for each was 8 % of a single-threaded
//! `read_write` transaction's CPU (the allocator's consolidation included).

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};

use parking_lot::{RwLockReadGuard, RwLockWriteGuard};

use super::frame::Frame;
use super::BufferPool;
use crate::io::AlignedBuf;
use crate::page::PageId;
use crate::redo::format::Change;

/// Page copies kept per thread for reuse (a mini-transaction changes at
/// most a few pages at once).
const SPARE_COPIES: usize = 4;

thread_local! {
    static SPARE: RefCell<Vec<Box<[u8]>>> = const { RefCell::new(Vec::new()) };
}

/// A copy of `page`, in a spare buffer of this thread's when it has one of
/// the right size.
fn page_copy(page: &[u8]) -> Box<[u8]> {
    // `try_with`: a guard used while the thread's locals are being torn
    // down (a page latched in another thread-local's destructor) just
    // allocates.
    let spare = SPARE
        .try_with(|s| {
            let mut s = s.borrow_mut();
            let i = s.iter().position(|b| b.len() == page.len())?;
            Some(s.swap_remove(i))
        })
        .ok()
        .flatten();
    match spare {
        Some(mut b) => {
            b.copy_from_slice(page);
            b
        }
        None => Box::from(page),
    }
}

/// Give a page copy back to this thread's stash (freed if it is full).
fn recycle(copy: Box<[u8]>) {
    // Dropped instead when the thread's locals are gone (see `page_copy`).
    let _ = SPARE.try_with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < SPARE_COPIES {
            s.push(copy);
        }
    });
}

/// A page under its shared latch.
pub struct PageRead<'a> {
    frame: &'a Frame,
    guard: Option<RwLockReadGuard<'a, AlignedBuf>>,
}

/// A page under its exclusive latch. The first mutable access keeps a copy
/// of the page as it was, so that the mini-transaction can log exactly the
/// bytes it changed, and so that a change never logged is undone when the
/// guard is dropped (module doc).
pub struct PageWrite<'a> {
    id: PageId,
    pool: &'a BufferPool,
    frame: &'a Frame,
    guard: Option<RwLockWriteGuard<'a, AlignedBuf>>,
    before: Option<Box<[u8]>>,
    zeroed: bool,
    /// The page was zeroed for a new life in this mtr ([`PageWrite::zero`]):
    /// it is logged as a zeroed page plus its bytes, like a fresh one, but
    /// put back as it was if the mtr logs nothing.
    reinit: bool,
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
        pool: &'a BufferPool,
        frame: &'a Frame,
        g: RwLockWriteGuard<'a, AlignedBuf>,
        zeroed: bool,
    ) -> Self {
        PageWrite {
            id,
            pool,
            frame,
            guard: Some(g),
            before: None,
            zeroed,
            reinit: false,
        }
    }

    /// Zero every byte of the page for a new life (freed, or taken off the
    /// free list). The redo record then starts from a zeroed page and
    /// carries only the bytes written after this, as for a fresh page,
    /// instead of a diff over every byte the page held: freeing a full
    /// page was logging the whole page. Recovery may rebuild a page from
    /// such a record even where the disk never held it, since the record
    /// defines every byte.
    pub(crate) fn zero(&mut self) {
        let b: &mut [u8] = self;
        b.fill(0);
        self.reinit = true;
    }

    /// The changes since the page was latched ([`diff_changes`]: byte
    /// ranges, and moves where a range is mostly shifted bytes), and
    /// whether they start from a zeroed page (a fresh or re-initialised
    /// one, whose changes are its bytes). None when nothing was changed.
    ///
    /// [`diff_changes`]: crate::redo::format::diff_changes
    pub(crate) fn changes(&self) -> Option<(bool, Vec<Change>)> {
        let now: &[u8] = self;
        if self.zeroed || self.reinit {
            let zeros = vec![0u8; now.len()];
            let r = crate::redo::format::diff_ranges(&zeros, now);
            return Some((
                true,
                r.into_iter().map(|(s, e)| Change::Bytes(s, e)).collect(),
            ));
        }
        let before = self.before.as_deref()?;
        let r = crate::redo::format::diff_changes(before, now);
        (!r.is_empty()).then_some((false, r))
    }

    /// The page's identity.
    pub fn id(&self) -> PageId {
        self.id
    }

    /// The page's changes so far are logged (or, for a test's page, need
    /// no log): dropping the guard no longer puts the page back. Called by
    /// `BufferPool::mark_dirty`; a later change is tracked afresh.
    pub(crate) fn keep_changes(&mut self) {
        if let Some(b) = self.before.take() {
            recycle(b);
        }
        self.zeroed = false;
        self.reinit = false;
    }

    pub(crate) fn frame(&self) -> &'a Frame {
        self.frame
    }

    /// The page's bytes for a change that needs no redo of its own: redo
    /// replaying a change the log already holds, or the page LSN that
    /// `BufferPool::mark_dirty` sets once the change is logged. Unlike
    /// the mutable deref it keeps no copy of the page as it was (a page
    /// copy per replayed record was most of recovery's memory traffic), so
    /// [`PageWrite::changes`] does not see what is changed through it, nor
    /// does dropping the guard undo it (redo marks the page dirty at once).
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
                    self.before = Some(page_copy(g));
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
        let Some(mut g) = self.guard.take() else {
            unreachable!("page guard released twice");
        };
        // Changes nobody logged go, under the latch (module doc).
        if self.zeroed {
            g.fill(0);
            self.pool.discard_fresh(self.id, self.frame, g);
            return;
        }
        if let Some(before) = self.before.take() {
            g.copy_from_slice(&before);
            recycle(before);
        }
        drop(g);
        self.frame.unfix();
    }
}
