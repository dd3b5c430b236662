//! A transaction's range scan: the rows its snapshot sees merged with the
//! transaction's own writes (its puts shown, its deletes hidden), in key
//! order, forward or in reverse.

use std::cmp::Ordering;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;

use crate::btree::LendRows;
use crate::error::Result;

use super::read::Snapshot;

/// A transaction's pending changes to one table: key → value, `None` for a
/// delete.
pub(super) type TableWrites = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// A transaction's view of a key range: each row is a (key, value) pair
/// or an I/O or corruption error (after which it ends).
///
/// [`Scan::next_row`] lends each row without copying it (the tree's rows
/// live in the scan's buffer until the next call); the [`Iterator`] gives
/// owned copies.
pub struct Scan<'t> {
    tree: Snapshot<'t>,
    /// The write set's entries in range, in scan order.
    overlay: VecDeque<(&'t [u8], Option<&'t [u8]>)>,
    reverse: bool,
    /// What the row returned last came from: stepped past at the next call.
    last: Last,
    /// An error was returned: the scan has ended.
    failed: bool,
}

/// The next row of a scan, as [`Scan::step`] finds it: `None` for the
/// tree's current row, `Some((key, value))` for one of the write set's.
type Next<'t> = Option<(&'t [u8], &'t [u8])>;

/// Where the row a scan returned last came from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Last {
    Nothing,
    Tree,
    Overlay,
    /// The write set's own value for a key the tree also holds.
    Both,
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
            overlay,
            reverse,
            last: Last::Nothing,
            failed: false,
        }
    }

    /// The next row, lent until the next call: `(key, value)`, or the
    /// error that ended the scan. Unlike the iterator, this copies nothing
    /// out of the pages but a version rebuilt from undo.
    ///
    /// ```
    /// # fn main() -> keel::Result<()> {
    /// # let dir = tempfile::tempdir().expect("tempdir");
    /// # let mut opts = keel::Options::default();
    /// # opts.set("buffer_pool_size", "16MiB")?;
    /// # opts.set("log_file_size", "4MiB")?;
    /// let db = keel::Db::open(dir.path(), opts)?;
    /// let t = db.create_table("t")?;
    /// t.put(b"a", b"1")?;
    /// t.put(b"b", b"22")?;
    /// let mut tx = db.begin();
    /// tx.put(&t, b"c", b"333")?; // its own writes are part of its view
    /// let mut scan = tx.scan(&t, ..)?;
    /// let mut bytes = 0;
    /// while let Some(row) = scan.next_row() {
    ///     let (_key, value) = row?;
    ///     bytes += value.len();
    /// }
    /// assert_eq!(bytes, 6);
    /// # Ok(())
    /// # }
    /// ```
    pub fn next_row(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        match self.step()? {
            Err(e) => Some(Err(e)),
            Ok(None) => Some(Ok(self.tree.current())),
            Ok(Some(row)) => Some(Ok(row)),
        }
    }

    /// Step past the row returned last and find the next: `Ok(None)` when
    /// it is the tree's current row, `Ok(Some(row))` for one of the write
    /// set's.
    fn step(&mut self) -> Option<Result<Next<'t>>> {
        if self.failed {
            return None;
        }
        match std::mem::replace(&mut self.last, Last::Nothing) {
            Last::Nothing => {}
            Last::Tree => self.tree.advance(),
            Last::Overlay => {
                self.overlay.pop_front();
            }
            Last::Both => {
                self.tree.advance();
                self.overlay.pop_front();
            }
        }
        loop {
            let in_tree = match self.tree.ensure() {
                None => false,
                Some(Ok(())) => true,
                Some(Err(e)) => {
                    self.failed = true;
                    self.overlay.clear();
                    return Some(Err(e));
                }
            };
            // Which comes first: the tree's row (Less) or the overlay's.
            let order = match (in_tree, self.overlay.front()) {
                (false, None) => return None,
                (true, None) => Ordering::Less,
                (false, Some(_)) => Ordering::Greater,
                (true, Some((ok, _))) => {
                    let o = self.tree.current().0.cmp(ok);
                    if self.reverse {
                        o.reverse()
                    } else {
                        o
                    }
                }
            };
            if order == Ordering::Less {
                self.last = Last::Tree;
                return Some(Ok(None));
            }
            let &(k, v) = self.overlay.front()?;
            match v {
                Some(v) => {
                    self.last = if order == Ordering::Equal {
                        Last::Both
                    } else {
                        Last::Overlay
                    };
                    return Some(Ok(Some((k, v))));
                }
                // Deleted by this transaction: hidden, with the tree's row.
                None => {
                    if order == Ordering::Equal {
                        self.tree.advance();
                    }
                    self.overlay.pop_front();
                }
            }
        }
    }
}

impl Iterator for Scan<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(self.next_row()?.map(|(k, v)| (k.to_vec(), v.to_vec())))
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
