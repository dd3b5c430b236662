//! Range scans without sibling pointers.
//!
//! The cursor copies the in-range entries of one leaf under its shared
//! latch, releases it, and finds the next leaf by descending again from the
//! root. During each descent it notes the leaf's fence: the nearest
//! separator beyond the leaf in the scan direction. The next descent starts
//! from that fence, so every batch moves strictly forward (or backward) and
//! no latch is ever held between batches: scans cannot deadlock with writers
//! in either direction and never touch a page that was freed meanwhile.
//! Entries written concurrently may or may not be seen; every entry returned
//! was present when its leaf was read, and keys come out strictly ordered.
//!
//! A leaf's entries are copied back to back into one buffer the cursor
//! keeps from leaf to leaf, so a scan allocates per leaf at most, never per
//! row: it lends the rows out of that buffer ([`LendRows`]), and the
//! [`Iterator`] copies each into owned vectors for callers who want them.
//! A cursor dropped leaves its buffers to the next cursor of its thread
//! ([`Spare`]): a transaction's short scans (sysbench's four ranges of 100
//! rows) would otherwise allocate a page-sized buffer each, a large
//! allocation that made the allocator sweep its caches of small chunks
//! (`malloc_consolidate`, about 1 % of a one-thread profile).

use std::cell::RefCell;
use std::ops::Bound;

use super::descend::descend_read;
use super::node::{cmp_keys, NodeRef};
use crate::engine::Engine;
use crate::error::Result;
use crate::page::PageId;

/// How many cells ahead a scan asks for a whole cell, and for a cell's
/// first line ([`NodeRef::prefetch_scan`]).
const PREFETCH_NEAR: usize = 3;
const PREFETCH_FAR: usize = 6;

/// An iterator over a key range of a tree, forward or in reverse.
pub struct Cursor<'a> {
    e: &'a Engine,
    root: PageId,
    /// Lower bound of what is still to be returned.
    lo: Bound<Vec<u8>>,
    /// Upper bound of what is still to be returned.
    hi: Bound<Vec<u8>>,
    reverse: bool,
    /// The current leaf's entries.
    b: RowBuf,
    /// The entry of `rows` to return next.
    pos: usize,
    done: bool,
}

/// A cursor's buffers: the current leaf's entries in scan order, each key
/// then its value (`buf`), and per entry where it starts, its key's length
/// and its value's length (`rows`). Dropped, they go to the next cursor of
/// the thread ([`SPARE`]). They are a type of their own, holding no borrow,
/// so that their `Drop` does not keep a cursor's (or a scan's) borrows
/// alive to the end of its scope.
#[derive(Default)]
struct RowBuf {
    buf: Vec<u8>,
    rows: Vec<(usize, usize, usize)>,
}

/// Spare buffers as the thread keeps them: plain vectors, whose drop (at
/// the thread's end) calls nothing back.
type Spare = (Vec<u8>, Vec<(usize, usize, usize)>);

thread_local! {
    /// The buffers of the last cursor dropped on this thread.
    static SPARE: RefCell<Option<Spare>> = const { RefCell::new(None) };
}

/// Buffers that grew past this many bytes (a scan of a tree with larger
/// pages) are not kept for the next cursor.
const SPARE_MAX: usize = 1 << 17;

impl RowBuf {
    /// The thread's spare buffers, or new ones.
    fn take() -> RowBuf {
        let (buf, rows) = SPARE
            .try_with(|s| s.try_borrow_mut().ok().and_then(|mut s| s.take()))
            .ok()
            .flatten()
            .unwrap_or_default();
        RowBuf { buf, rows }
    }
}

impl Drop for RowBuf {
    fn drop(&mut self) {
        if self.buf.capacity() > SPARE_MAX {
            return;
        }
        let mut spare: Spare = (
            std::mem::take(&mut self.buf),
            std::mem::take(&mut self.rows),
        );
        spare.0.clear();
        spare.1.clear();
        // A thread being torn down has no slot left: the buffers are freed.
        let _ = SPARE.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                *s = Some(spare);
            }
        });
    }
}

impl<'a> Cursor<'a> {
    pub(super) fn new(
        e: &'a Engine,
        root: PageId,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        reverse: bool,
    ) -> Self {
        Cursor {
            e,
            root,
            lo,
            hi,
            reverse,
            b: RowBuf::take(),
            pos: 0,
            done: false,
        }
    }

    /// Append one entry to the batch.
    fn push(&mut self, key: &[u8], value: &[u8]) {
        self.b.rows.push((self.b.buf.len(), key.len(), value.len()));
        self.b.buf.extend_from_slice(key);
        self.b.buf.extend_from_slice(value);
    }

    /// Copy the next leaf's entries (ascending) and move `lo` past it.
    fn fill_forward(&mut self) -> Result<()> {
        let mut fence: Option<Vec<u8>> = None;
        let lo = &self.lo;
        let leaf = descend_read(self.e, self.root, |n| {
            let pos = match lo {
                Bound::Unbounded => 0,
                Bound::Included(k) | Bound::Excluded(k) => n.child_pos(k),
            };
            if pos < n.n_cells() {
                fence = Some(n.key(pos).to_vec());
            }
            pos
        })?;
        let n = NodeRef::new(&leaf);
        let start = match &self.lo {
            Bound::Unbounded => 0,
            Bound::Included(k) => n.search(k).unwrap_or_else(|i| i),
            Bound::Excluded(k) => n.search(k).map_or_else(|i| i, |i| i + 1),
        };
        for i in start + 1..start + PREFETCH_FAR {
            n.prefetch_scan(usize::MAX, i);
        }
        for i in start..n.n_cells() {
            n.prefetch_scan(i + PREFETCH_NEAR, i + PREFETCH_FAR);
            if !below(n.key(i), &self.hi) {
                self.done = true;
                return Ok(());
            }
            self.push(n.key(i), n.value(i));
        }
        drop(leaf);
        match fence {
            Some(f) if below(&f, &self.hi) => self.lo = Bound::Included(f),
            _ => self.done = true,
        }
        Ok(())
    }

    /// Copy the previous leaf's entries (descending) and move `hi` before it.
    fn fill_backward(&mut self) -> Result<()> {
        let mut fence: Option<Vec<u8>> = None;
        let hi = &self.hi;
        let leaf = descend_read(self.e, self.root, |n| {
            let pos = match hi {
                Bound::Unbounded => n.n_cells(),
                Bound::Included(k) => n.child_pos(k),
                Bound::Excluded(k) => n.search(k).unwrap_or_else(|i| i),
            };
            if pos > 0 {
                fence = Some(n.key(pos - 1).to_vec());
            }
            pos
        })?;
        let n = NodeRef::new(&leaf);
        let end = match &self.hi {
            Bound::Unbounded => n.n_cells(),
            Bound::Included(k) => n.search(k).map_or_else(|i| i, |i| i + 1),
            Bound::Excluded(k) => n.search(k).unwrap_or_else(|i| i),
        };
        for i in 2..=PREFETCH_FAR {
            n.prefetch_scan(usize::MAX, end.wrapping_sub(i));
        }
        for i in (0..end).rev() {
            n.prefetch_scan(i.wrapping_sub(PREFETCH_NEAR), i.wrapping_sub(PREFETCH_FAR));
            if !above(n.key(i), &self.lo) {
                self.done = true;
                return Ok(());
            }
            self.push(n.key(i), n.value(i));
        }
        drop(leaf);
        match fence {
            Some(f) if room_below(&f, &self.lo) => self.hi = Bound::Excluded(f),
            _ => self.done = true,
        }
        Ok(())
    }
}

/// Rows lent one at a time out of a buffer of the lender's: a [`Cursor`],
/// or a read view's rows over one (`txn::read::Snapshot`).
pub(crate) trait LendRows {
    /// Make [`LendRows::current`] a row: `None` at the end, `Some(Err)` if
    /// reading failed (the lender then ends).
    fn ensure(&mut self) -> Option<Result<()>>;

    /// The row [`LendRows::ensure`] found: `(key, value)`.
    ///
    /// # Panics
    /// If `ensure` did not return `Some(Ok(()))` since the last
    /// [`LendRows::advance`].
    fn current(&self) -> (&[u8], &[u8]);

    /// Step past the current row.
    fn advance(&mut self);

    /// The next row as owned copies: what the lenders' iterators return.
    fn next_owned(&mut self) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        if let Err(e) = self.ensure()? {
            return Some(Err(e));
        }
        let (k, v) = self.current();
        let row = (k.to_vec(), v.to_vec());
        self.advance();
        Some(Ok(row))
    }
}

impl LendRows for Cursor<'_> {
    /// Make [`LendRows::current`] an entry: `None` at the end of the range,
    /// `Some(Err)` if reading the next leaf failed (the cursor then ends).
    fn ensure(&mut self) -> Option<Result<()>> {
        while self.pos >= self.b.rows.len() {
            if self.done {
                return None;
            }
            self.b.buf.clear();
            self.b.rows.clear();
            self.pos = 0;
            // A leaf's entries never fill more than its page: one
            // allocation for the whole scan.
            self.b.buf.reserve(self.e.page_size());
            let filled = if self.reverse {
                self.fill_backward()
            } else {
                self.fill_forward()
            };
            if let Err(err) = filled {
                self.done = true;
                self.b.rows.clear();
                return Some(Err(err));
            }
        }
        Some(Ok(()))
    }

    /// The entry [`LendRows::ensure`] found: `(key, value)`.
    ///
    /// # Panics
    /// If `ensure` did not return `Some(Ok(()))` since the last
    /// [`LendRows::advance`].
    fn current(&self) -> (&[u8], &[u8]) {
        let (at, k, v) = self.b.rows[self.pos];
        (&self.b.buf[at..at + k], &self.b.buf[at + k..at + k + v])
    }

    /// Step past the current entry.
    fn advance(&mut self) {
        self.pos += 1;
    }
}

/// `k` is inside the upper bound.
fn below(k: &[u8], hi: &Bound<Vec<u8>>) -> bool {
    match hi {
        Bound::Unbounded => true,
        Bound::Included(h) => cmp_keys(k, h).is_le(),
        Bound::Excluded(h) => cmp_keys(k, h).is_lt(),
    }
}

/// `k` is inside the lower bound.
fn above(k: &[u8], lo: &Bound<Vec<u8>>) -> bool {
    match lo {
        Bound::Unbounded => true,
        Bound::Included(l) => cmp_keys(k, l).is_ge(),
        Bound::Excluded(l) => cmp_keys(k, l).is_gt(),
    }
}

/// Some key strictly below `f` can be inside the lower bound.
fn room_below(f: &[u8], lo: &Bound<Vec<u8>>) -> bool {
    match lo {
        Bound::Unbounded => true,
        Bound::Included(l) | Bound::Excluded(l) => &l[..] < f,
    }
}

impl Iterator for Cursor<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_owned()
    }
}
