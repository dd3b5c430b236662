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

use std::collections::VecDeque;
use std::ops::Bound;

use super::descend::descend_read;
use super::node::NodeRef;
use crate::engine::Engine;
use crate::error::Result;
use crate::page::PageId;

/// An iterator over a key range of a tree, forward or in reverse.
pub struct Cursor<'a> {
    e: &'a Engine,
    root: PageId,
    /// Lower bound of what is still to be returned.
    lo: Bound<Vec<u8>>,
    /// Upper bound of what is still to be returned.
    hi: Bound<Vec<u8>>,
    reverse: bool,
    batch: VecDeque<(Vec<u8>, Vec<u8>)>,
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
            batch: VecDeque::new(),
            done: false,
        }
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
        for i in start..n.n_cells() {
            if !below(n.key(i), &self.hi) {
                self.done = true;
                return Ok(());
            }
            self.batch
                .push_back((n.key(i).to_vec(), n.value(i).to_vec()));
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
        for i in (0..end).rev() {
            if !above(n.key(i), &self.lo) {
                self.done = true;
                return Ok(());
            }
            self.batch
                .push_back((n.key(i).to_vec(), n.value(i).to_vec()));
        }
        drop(leaf);
        match fence {
            Some(f) if room_below(&f, &self.lo) => self.hi = Bound::Excluded(f),
            _ => self.done = true,
        }
        Ok(())
    }
}

/// `k` is inside the upper bound.
fn below(k: &[u8], hi: &Bound<Vec<u8>>) -> bool {
    match hi {
        Bound::Unbounded => true,
        Bound::Included(h) => k <= &h[..],
        Bound::Excluded(h) => k < &h[..],
    }
}

/// `k` is inside the lower bound.
fn above(k: &[u8], lo: &Bound<Vec<u8>>) -> bool {
    match lo {
        Bound::Unbounded => true,
        Bound::Included(l) => k >= &l[..],
        Bound::Excluded(l) => k > &l[..],
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
        loop {
            if let Some(kv) = self.batch.pop_front() {
                return Some(Ok(kv));
            }
            if self.done {
                return None;
            }
            let filled = if self.reverse {
                self.fill_backward()
            } else {
                self.fill_forward()
            };
            if let Err(err) = filled {
                self.done = true;
                return Some(Err(err));
            }
        }
    }
}
