//! The version header every row of a table carries in its leaf: which
//! commit wrote this version, where the version before it is kept, and
//! whether this version is a delete mark.
//!
//! Layout of a stored value (integers little-endian):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | flags: bit 0 = delete-marked (the row was deleted by `trx_no`) |
//! | 1 | 8 | `trx_no`: the commit number (the LSN of its commit record) of the commit that wrote this version; 0 = older than any read view (bulk-loaded rows) |
//! | 9 | 6 | roll pointer: the undo record holding the version before (`undo::RollPtr`); 0 = there was none (the row did not exist) |
//! | 15 | … | the user's value (empty for a delete mark) |
//!
//! This is InnoDB's `DB_TRX_ID` and `DB_ROLL_PTR` with the delete-mark bit
//! of the record header. The catalog's tree is not versioned.

use crate::btree::node::max_value_len;
use crate::btree::{check_tree, Pages, TreeStats};
use crate::error::{Error, Result};
use crate::page::PageId;
use crate::undo::RollPtr;

/// Bytes of the header before the user's value.
pub(crate) const HEADER: usize = 15;

const DELETED: u8 = 1;

/// Longest user value a table accepts on pages of `page_size` bytes: the
/// tree's limit less the version header.
pub(crate) const fn max_user_value_len(page_size: usize) -> usize {
    max_value_len(page_size) - HEADER
}

/// One decoded version, borrowing its value from the stored bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Version<'a> {
    pub deleted: bool,
    pub trx_no: u64,
    pub roll: RollPtr,
    pub value: &'a [u8],
}

impl<'a> Version<'a> {
    /// Decode a stored value; an error names `key`'s table by its root page.
    pub(crate) fn decode(stored: &'a [u8], root: u32) -> Result<Version<'a>> {
        if stored.len() < HEADER || stored[0] & !DELETED != 0 {
            return Err(Error::Corruption(format!(
                "a row of the table rooted at page {root} has a malformed version header \
                 ({} bytes, flags {:#x})",
                stored.len(),
                stored.first().copied().unwrap_or(0)
            )));
        }
        let deleted = stored[0] & DELETED != 0;
        if deleted && stored.len() != HEADER {
            return Err(Error::Corruption(format!(
                "a delete-marked row of the table rooted at page {root} carries a value"
            )));
        }
        let mut no = [0u8; 8];
        no.copy_from_slice(&stored[1..9]);
        Ok(Version {
            deleted,
            trx_no: u64::from_le_bytes(no),
            roll: RollPtr::from_bytes(&stored[9..15]),
            value: &stored[HEADER..],
        })
    }

    /// The user's value, `None` for a delete mark.
    pub(crate) fn row(&self) -> Option<&'a [u8]> {
        (!self.deleted).then_some(self.value)
    }
}

/// Check a table's tree rooted at `root` (`BTree::check`), counting the
/// delete marks purge has not removed yet into `delete_marked`.
pub(crate) fn check_table<P: Pages>(pages: &P, root: PageId) -> Result<TreeStats> {
    let mut marks = 0;
    let mut count = |_: &[u8], stored: &[u8]| {
        marks += usize::from(stored.first().is_some_and(|f| f & DELETED != 0));
    };
    let mut stats = check_tree(pages, root, Some(&mut count))?;
    stats.delete_marked = marks;
    Ok(stats)
}

/// Encode a version: `value` `None` is a delete mark.
pub(crate) fn encode(trx_no: u64, roll: RollPtr, value: Option<&[u8]>) -> Vec<u8> {
    let v = value.unwrap_or(&[]);
    let mut out = Vec::with_capacity(HEADER + v.len());
    out.push(if value.is_none() { DELETED } else { 0 });
    out.extend_from_slice(&trx_no.to_le_bytes());
    out.extend_from_slice(&roll.to_bytes());
    out.extend_from_slice(v);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn versions_round_trip(
            no in any::<u64>(),
            page in any::<u32>(),
            off in any::<u16>(),
            value in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64)),
        ) {
            let roll = RollPtr::new(page, off);
            let s = encode(no, roll, value.as_deref());
            let v = Version::decode(&s, 7).unwrap();
            prop_assert_eq!(v.trx_no, no);
            prop_assert_eq!(v.roll, roll);
            prop_assert_eq!(v.row(), value.as_deref());
        }

        #[test]
        fn garbage_is_an_error_not_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = Version::decode(&bytes, 7);
        }
    }

    #[test]
    fn short_or_flagged_values_are_corruption() {
        assert!(Version::decode(&[0; 14], 3).is_err());
        let mut s = encode(1, RollPtr::NONE, Some(b"x"));
        s[0] = 2;
        assert!(Version::decode(&s, 3).is_err());
        let mut s = encode(1, RollPtr::NONE, Some(b"x"));
        s[0] = DELETED;
        assert!(Version::decode(&s, 3).is_err());
    }
}
