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
//! # Changes a range at a time
//!
//! Copying a whole page at its first change, and diffing the whole page at
//! commit, was 18 % of a single-threaded `read_write` transaction's CPU
//! (2-core VM, `perf`), for changes of a few hundred bytes. So a guard
//! changed through [`PageBytes::range_mut`] (the B+tree's node edits, the
//! undo log's appends) keeps only the bytes of each range handed out, as
//! they were just before ([`Spans`]): undoing puts them back last first,
//! which restores the page as latched even where ranges overlap, and the
//! diff at commit compares only windows around the ranges
//! ([`diff_changes_at`], which finds exactly what the whole page's diff
//! finds because no byte outside a range can have changed). That holds
//! because a range is the only way in: the first plain mutable access
//! (`DerefMut`) turns the spans into the whole copy (the page now, with
//! the saved bytes put back) and from then on the guard works as above; so
//! does a guard whose spans grow past a quarter of the page. A fresh or
//! re-initialised page needs neither (its changes are diffed against
//! zeros).
//!
//! [`diff_changes_at`]: crate::redo::format::diff_changes_at
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
use crate::page::{PageBytes, PageId};
use crate::redo::format::{self, Change, DIFF_WINDOW_SLACK};

/// Page copies kept per thread for reuse (a mini-transaction changes at
/// most a few pages at once).
const SPARE_COPIES: usize = 4;

thread_local! {
    static SPARE: RefCell<Vec<Box<[u8]>>> = const { RefCell::new(Vec::new()) };
    static SPARE_SPANS: RefCell<Vec<Spans>> = const { RefCell::new(Vec::new()) };
}

/// The ranges a guard handed out through [`PageBytes::range_mut`], each
/// with the bytes it held just before (module doc).
#[derive(Default)]
struct Spans {
    /// `(start, end)` of each range, in the order handed out.
    list: Vec<(usize, usize)>,
    /// Their bytes as they were, one range after another.
    saved: Vec<u8>,
    /// Scratch for [`Spans::changes`]: the windows, and one window's
    /// bytes as they were (kept with the spans so that a commit allocates
    /// neither).
    wins: Vec<(usize, usize)>,
    was: Vec<u8>,
}

impl Spans {
    /// Empty spans, from this thread's stash when it has some (their
    /// vectors keep their capacity).
    fn take() -> Spans {
        SPARE_SPANS
            .try_with(|s| s.borrow_mut().pop())
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    /// Give them back to the stash, emptied.
    fn recycle(mut self) {
        self.list.clear();
        self.saved.clear();
        let _ = SPARE_SPANS.try_with(|s| {
            let mut s = s.borrow_mut();
            if s.len() < SPARE_COPIES {
                s.push(self);
            }
        });
    }

    /// Put the saved bytes that fall in `page[base..base + out.len()]`
    /// back into `out` (which holds those bytes as they are now), last
    /// range first: `out` then holds them as they were before the first
    /// range was handed out.
    fn restore(&self, out: &mut [u8], base: usize) {
        let end = base + out.len();
        let mut at = self.saved.len();
        for &(s, e) in self.list.iter().rev() {
            at -= e - s;
            let (lo, hi) = (s.max(base), e.min(end));
            if lo < hi {
                out[lo - base..hi - base].copy_from_slice(&self.saved[at + lo - s..at + hi - s]);
            }
        }
    }

    /// The changes from the page as it was to `now`, diffing only windows
    /// around the ranges (module doc).
    fn changes(&mut self, now: &[u8]) -> Vec<Change> {
        let n = now.len();
        let mut wins = std::mem::take(&mut self.wins);
        let mut was = std::mem::take(&mut self.was);
        wins.clear();
        wins.extend(
            self.list
                .iter()
                .filter(|(s, e)| s < e)
                .map(|&(s, e)| (s, (e + DIFF_WINDOW_SLACK).min(n))),
        );
        wins.sort_unstable();
        // Merge in place: windows closer than the slack become one (see
        // `diff_changes_at`).
        let mut k = 0;
        for i in 0..wins.len() {
            let (s, e) = wins[i];
            if k > 0 && s <= wins[k - 1].1 + DIFF_WINDOW_SLACK {
                wins[k - 1].1 = wins[k - 1].1.max(e);
            } else {
                wins[k] = (s, e);
                k += 1;
            }
        }
        wins.truncate(k);
        let mut out = Vec::with_capacity(2 * k + 2);
        for &(a, b) in &wins {
            was.clear();
            was.extend_from_slice(&now[a..b]);
            self.restore(&mut was, a);
            format::diff_changes_at(&was, &now[a..b], a, &mut out);
        }
        self.wins = wins;
        self.was = was;
        out
    }
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
    /// Whether the frame was fixed for this guard (and is unfixed when it
    /// goes). A reader that took the latch under the page-hash shard's lock
    /// holds no fix: the shared latch alone keeps the page in the frame
    /// (`frame.rs`, "Field protocol").
    fixed: bool,
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
    /// The whole page as it was, once it was changed other than through
    /// ranges (module doc).
    before: Option<Box<[u8]>>,
    /// The ranges changed so far and their bytes as they were, while
    /// `before` is `None`.
    spans: Option<Spans>,
    zeroed: bool,
    /// The page was zeroed for a new life in this mtr ([`PageWrite::zero`]):
    /// it is logged as a zeroed page plus its bytes, like a fresh one, but
    /// put back as it was if the mtr logs nothing.
    reinit: bool,
}

impl<'a> PageRead<'a> {
    /// A guard over a fixed frame: the fix goes with the guard.
    pub(crate) fn new(frame: &'a Frame, g: RwLockReadGuard<'a, AlignedBuf>) -> Self {
        PageRead {
            frame,
            guard: Some(g),
            fixed: true,
        }
    }

    /// A guard over a frame latched without a fix, under the lock of the
    /// page-hash shard that maps the page to it
    /// (`Instance::lookup_for_read`).
    pub(crate) fn unfixed(frame: &'a Frame, g: RwLockReadGuard<'a, AlignedBuf>) -> Self {
        PageRead {
            frame,
            guard: Some(g),
            fixed: false,
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
            spans: None,
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
    pub(crate) fn changes(&mut self) -> Option<(bool, Vec<Change>)> {
        let Some(g) = &self.guard else {
            unreachable!("page guard used after release");
        };
        let now: &[u8] = g;
        if self.zeroed || self.reinit {
            let zeros = vec![0u8; now.len()];
            let r = crate::redo::format::diff_ranges(&zeros, now);
            return Some((
                true,
                r.into_iter().map(|(s, e)| Change::Bytes(s, e)).collect(),
            ));
        }
        let r = match (&self.before, &mut self.spans) {
            (Some(before), _) => format::diff_changes(before, now),
            (None, Some(spans)) => spans.changes(now),
            (None, None) => return None,
        };
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
        if let Some(sp) = self.spans.take() {
            sp.recycle();
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
        self.keep_whole();
        match &mut self.guard {
            Some(g) => g,
            None => unreachable!("page guard used after release"),
        }
    }
}

impl PageWrite<'_> {
    /// Keep the whole page as it was, if nothing does yet: a copy of the
    /// page now with the ranges' saved bytes put back (module doc).
    fn keep_whole(&mut self) {
        if self.before.is_some() || self.zeroed {
            return;
        }
        let Some(g) = &self.guard else {
            unreachable!("page guard used after release");
        };
        let mut copy = page_copy(g);
        if let Some(sp) = self.spans.take() {
            sp.restore(&mut copy, 0);
            sp.recycle();
        }
        self.before = Some(copy);
    }
}

impl PageBytes for PageWrite<'_> {
    fn bytes(&self) -> &[u8] {
        self
    }

    /// The bytes of `r`, keeping only them as they were (module doc).
    ///
    /// # Panics
    /// If `r` is not within the page, like slicing.
    fn range_mut(&mut self, r: std::ops::Range<usize>) -> &mut [u8] {
        let len = self.len();
        assert!(
            r.start <= r.end && r.end <= len,
            "range {r:?} of a {len}-byte page"
        );
        if self.before.is_none() && !self.zeroed {
            let spans = self.spans.get_or_insert_with(Spans::take);
            if spans.saved.len() + r.len() > len / 4 {
                self.keep_whole();
            } else if let Some(g) = &self.guard {
                spans.list.push((r.start, r.end));
                spans.saved.extend_from_slice(&g[r.clone()]);
            }
        }
        match &mut self.guard {
            Some(g) => &mut g[r],
            None => unreachable!("page guard used after release"),
        }
    }
}

impl Drop for PageRead<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        if self.fixed {
            self.frame.unfix();
        }
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
        } else if let Some(sp) = self.spans.take() {
            sp.restore(&mut g, 0);
            sp.recycle();
        }
        drop(g);
        self.frame.unfix();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use proptest::prelude::*;

    use crate::btree::test_engine::engine;
    use crate::page::{PageBytes, PageId};
    use crate::redo::format::{diff_changes, Change};

    /// One change through a guard.
    #[derive(Clone, Debug)]
    enum Edit {
        /// Fill a range through `range_mut`.
        Fill(usize, usize, u8),
        /// Shift a range by a few bytes through `range_mut` (a slot array).
        Shift(usize, usize, bool),
        /// Fill a range a few bytes past the end of the last one (where
        /// the whole page's diff merges ranges, or nearly).
        Near(usize, usize, u8),
        /// Write one byte through the plain mutable slice.
        Plain(usize, u8),
    }

    fn edit() -> impl Strategy<Value = Edit> {
        prop_oneof![
            8 => (any::<usize>(), 0usize..600, any::<u8>()).prop_map(|(o, l, v)| Edit::Fill(o, l, v)),
            3 => (any::<usize>(), 3usize..300, any::<bool>()).prop_map(|(o, l, r)| Edit::Shift(o, l, r)),
            6 => (0usize..24, 1usize..40, any::<u8>()).prop_map(|(g, l, v)| Edit::Near(g, l, v)),
            1 => (any::<usize>(), any::<u8>()).prop_map(|(o, v)| Edit::Plain(o, v)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// However a page is changed (ranges that overlap, touch or lie a
        /// few bytes apart, shifts, a plain write turning the spans into a
        /// whole copy), the guard's changes are exactly the whole page's
        /// diff, and dropping the guard unlogged puts every byte back.
        #[test]
        fn ranges_log_what_the_whole_page_diff_logs_and_undo_exactly(
            seed in any::<u64>(),
            edits in prop::collection::vec(edit(), 0..24),
            ps in prop::sample::select(vec![4096usize, 16384]),
        ) {
            let e = engine(ps);
            let id = PageId::new(e.space_id(), 7);
            let mut x = seed | 1;
            let original: Vec<u8> = (0..ps)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // Runs of equal bytes, so that some writes change nothing.
                    (x % 3) as u8
                })
                .collect();
            {
                let mut w = e.pool.create(id).unwrap();
                w.copy_from_slice(&original);
                w.keep_changes();
            }
            let mut w = e.pool.write(id).unwrap();
            let mut last = 100;
            for ed in &edits {
                match *ed {
                    Edit::Fill(o, l, v) => {
                        let o = o % ps;
                        let end = (o + l).min(ps);
                        w.range_mut(o..end).fill(v);
                        last = end;
                    }
                    Edit::Near(g, l, v) => {
                        let o = (last + g).min(ps);
                        let end = (o + l).min(ps);
                        // A value the page never holds: every byte changes.
                        w.range_mut(o..end).fill(v | 0x80);
                        last = end;
                    }
                    Edit::Shift(o, l, right) => {
                        let o = o % (ps - l);
                        let r = w.range_mut(o..o + l);
                        if right {
                            r.copy_within(0..l - 2, 2);
                        } else {
                            r.copy_within(2..l, 0);
                        }
                    }
                    Edit::Plain(o, v) => w[o % ps] = v,
                }
            }
            let want = diff_changes(&original, &w);
            let got: Vec<Change> = w.changes().map(|(z, c)| {
                assert!(!z);
                c
            }).unwrap_or_default();
            prop_assert_eq!(got, want);
            drop(w);
            prop_assert_eq!(&e.pool.read(id).unwrap()[..], &original[..]);
        }
    }
}
