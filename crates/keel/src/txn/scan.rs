//! A transaction's range scan: the rows its snapshot sees merged with the
//! transaction's own writes (its puts shown, its deletes hidden), in key
//! order, forward or in reverse.

use std::cmp::Ordering;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;

use crate::error::Result;

use super::read::Snapshot;

/// A transaction's pending changes to one table: key → value, `None` for a
/// delete.
pub(super) type TableWrites = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// An iterator over a transaction's view of a key range: each item is a
/// (key, value) pair or an I/O or corruption error (after which it ends).
pub struct Scan<'t> {
    tree: Snapshot<'t>,
    /// The tree's next row, read ahead for the merge.
    tree_next: Option<(Vec<u8>, Vec<u8>)>,
    tree_done: bool,
    /// The write set's entries in range, in scan order.
    overlay: VecDeque<(&'t [u8], Option<&'t [u8]>)>,
    reverse: bool,
}

impl<'t> Scan<'t> {
    pub(super) fn new(
        tree: Snapshot<'t>,
        writes: Option<&'t TableWrites>,
        lo: &Bound<Vec<u8>>,
        hi: &Bound<Vec<u8>>,
        reverse: bool,
    ) -> Self {
        let mut overlay: VecDeque<_> = match writes {
            Some(w) if nonempty(lo, hi) => w
                .range::<[u8], _>((as_slice(lo), as_slice(hi)))
                .map(|(k, v)| (k.as_slice(), v.as_deref()))
                .collect(),
            _ => VecDeque::new(),
        };
        if reverse {
            overlay.make_contiguous().reverse();
        }
        Scan {
            tree,
            tree_next: None,
            tree_done: false,
            overlay,
            reverse,
        }
    }

    /// Read the tree's next row into `tree_next` if it is empty.
    fn fill(&mut self) -> Result<()> {
        if self.tree_next.is_none() && !self.tree_done {
            match self.tree.next() {
                None => self.tree_done = true,
                Some(Ok(row)) => self.tree_next = Some(row),
                Some(Err(e)) => {
                    self.tree_done = true;
                    self.overlay.clear();
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}

impl Iterator for Scan<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Err(e) = self.fill() {
                return Some(Err(e));
            }
            // Which comes first: the tree's row (Less) or the overlay's.
            let order = match (&self.tree_next, self.overlay.front()) {
                (None, None) => return None,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some((tk, _)), Some((ok, _))) => {
                    let o = tk.as_slice().cmp(ok);
                    if self.reverse {
                        o.reverse()
                    } else {
                        o
                    }
                }
            };
            if order == Ordering::Less {
                return self.tree_next.take().map(Ok);
            }
            if order == Ordering::Equal {
                self.tree_next = None;
            }
            if let Some((k, Some(v))) = self.overlay.pop_front() {
                return Some(Ok((k.to_vec(), v.to_vec())));
            }
        }
    }
}

/// `BTreeMap::range` panics on an inverted range; such a range is empty.
fn nonempty(lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    match (lo, hi) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => true,
        (Bound::Excluded(a), Bound::Excluded(b)) => a < b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            a <= b
        }
    }
}

fn as_slice(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}
