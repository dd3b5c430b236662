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
    /// The current leaf's entries in scan order, each key then its value.
    buf: Vec<u8>,
    /// Per entry in `buf`: where it starts, its key's length and its
    /// value's length.
    rows: Vec<(usize, usize, usize)>,
    /// The entry of `rows` to return next.
    pos: usize,
    done: bool,
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
            buf: Vec::new(),
            rows: Vec::new(),
            pos: 0,
            done: false,
        }
    }

    /// Append one entry to the batch.
    fn push(&mut self, key: &[u8], value: &[u8]) {
        self.rows.push((self.buf.len(), key.len(), value.len()));
        self.buf.extend_from_slice(key);
        self.buf.extend_from_slice(value);
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
        while self.pos >= self.rows.len() {
            if self.done {
                return None;
            }
            self.buf.clear();
            self.rows.clear();
            self.pos = 0;
            // A leaf's entries never fill more than its page: one
            // allocation for the whole scan.
            self.buf.reserve(self.e.page_size());
            let filled = if self.reverse {
                self.fill_backward()
            } else {
                self.fill_forward()
            };
            if let Err(err) = filled {
                self.done = true;
                self.rows.clear();
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
        let (at, k, v) = self.rows[self.pos];
        (&self.buf[at..at + k], &self.buf[at + k..at + k + v])
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
