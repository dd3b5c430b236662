//! The version header every row of a table carries in its leaf: which
//! commit wrote this version, where the version before it is kept, and
//! whether this version is a delete mark.
//!
//! Layout of a stored value (integers little-endian):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | flags: bit 0 = delete-marked (the row was deleted by `trx_no`); bit 1 = external (the value is in an overflow chain) |
//! | 1 | 8 | `trx_no`: the commit number (the LSN of its commit record) of the commit that wrote this version; 0 = older than any read view (bulk-loaded rows) |
//! | 9 | 6 | roll pointer: the undo record holding the version before (`undo::RollPtr`); 0 = there was none (the row did not exist) |
//! | 15 | … | the user's value, or for an external value the 20-byte `lob::Pointer` to its chain; a delete mark keeps the inline value it deleted (empty where that value was external) |
//!
//! A delete mark keeps the row's bytes in place, as InnoDB's does: the
//! delete changes the header only, and its undo record keeps the old
//! header alone (a delta of the kept value, [`undo_delta`]). Readers never
//! return a delete mark's bytes: a view that sees the mark sees no row.
//! An external value is not kept (the chain belongs to the version in the
//! undo record, which purge frees).
//!
//! A value longer than [`max_inline_len`] is external: it lives in an
//! overflow chain (`lob`), written before the commit record, and the row
//! keeps the pointer (InnoDB's `DYNAMIC` row format keeps a 20-byte
//! pointer too). Every version owns its chain: a new value writes a new
//! chain, and the chain is freed with the version (`lob`'s module doc).
//!
//! This is InnoDB's `DB_TRX_ID` and `DB_ROLL_PTR` with the delete-mark bit
//! of the record header. The catalog's tree is not versioned.

use crate::btree::node::max_value_len;
use crate::btree::{check_tree, Pages, TreeStats};
use crate::error::{Error, Result};
use crate::lob::{Pointer, MAX_VALUE_LEN, POINTER_LEN};
use crate::page::PageId;
use crate::undo::RollPtr;

/// Bytes of the header before the user's value.
pub(crate) const HEADER: usize = 15;

const DELETED: u8 = 1;
const EXTERNAL: u8 = 2;

/// Longest user value a table accepts: [`MAX_VALUE_LEN`], whatever the
/// page size (longer than [`max_inline_len`] it goes to an overflow chain).
pub(crate) const fn max_user_value_len(_page_size: usize) -> usize {
    MAX_VALUE_LEN
}

/// Longest user value kept in its leaf on pages of `page_size` bytes: the
/// tree's limit less the version header.
pub(crate) const fn max_inline_len(page_size: usize) -> usize {
    max_value_len(page_size) - HEADER
}

// A pointer always fits inline.
const _: () = assert!(POINTER_LEN <= max_inline_len(crate::page::MIN_PAGE_SIZE));

/// One decoded version, borrowing its value from the stored bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Version<'a> {
    pub deleted: bool,
    pub trx_no: u64,
    pub roll: RollPtr,
    /// The stored bytes after the header: the value, or the pointer to it;
    /// for a delete mark, the inline value it deleted (never a row).
    pub value: &'a [u8],
    /// The chain holding the value, for an external one.
    pub external: Option<Pointer>,
}

impl<'a> Version<'a> {
    /// Decode a stored value; an error names `key`'s table by its root page.
    pub(crate) fn decode(stored: &'a [u8], root: u32) -> Result<Version<'a>> {
        if stored.len() < HEADER || stored[0] & !(DELETED | EXTERNAL) != 0 {
            return Err(Error::Corruption(format!(
                "a row of the table rooted at page {root} has a malformed version header \
                 ({} bytes, flags {:#x})",
                stored.len(),
                stored.first().copied().unwrap_or(0)
            )));
        }
        let deleted = stored[0] & DELETED != 0;
        let external = if stored[0] & EXTERNAL != 0 {
            match Pointer::from_bytes(&stored[HEADER..]) {
                Some(p) if !deleted => Some(p),
                _ => {
                    return Err(Error::Corruption(format!(
                        "a row of the table rooted at page {root} is marked external but \
                         holds no overflow pointer ({} bytes)",
                        stored.len() - HEADER
                    )))
                }
            }
        } else {
            None
        };
        let mut no = [0u8; 8];
        no.copy_from_slice(&stored[1..9]);
        Ok(Version {
            deleted,
            trx_no: u64::from_le_bytes(no),
            roll: RollPtr::from_bytes(&stored[9..15]),
            value: &stored[HEADER..],
            external,
        })
    }

    /// The user's value, `None` for a delete mark; an external value is
    /// read from its chain through `pages`.
    pub(crate) fn row<P: Pages>(&self, pages: &P, space: u32) -> Result<Option<Vec<u8>>> {
        if self.deleted {
            return Ok(None);
        }
        match self.external {
            Some(p) => crate::lob::read(pages, space, p).map(Some),
            None => Ok(Some(self.value.to_vec())),
        }
    }
}

/// Check a table's tree rooted at `root` (`BTree::check`), counting the
/// delete marks purge has not removed yet into `delete_marked`.
/// Every external value's chain is checked whole (`lob::walk`) and its
/// pages counted into `overflow_pages`; no chain may be named twice.
pub(crate) fn check_table<P: Pages>(pages: &P, root: PageId) -> Result<TreeStats> {
    let mut marks = 0;
    let mut chains = Vec::new();
    let mut first_err = None;
    let mut count = |_: &[u8], stored: &[u8]| {
        marks += usize::from(stored.first().is_some_and(|f| f & DELETED != 0));
        match Version::decode(stored, root.page_no) {
            Ok(v) => chains.extend(v.external),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    };
    let mut stats = check_tree(pages, root, Some(&mut count))?;
    if let Some(e) = first_err {
        return Err(e);
    }
    stats.delete_marked = marks;
    let mut seen = std::collections::HashSet::new();
    for p in chains {
        if !seen.insert(p.head) {
            return Err(Error::Corruption(format!(
                "two rows of the table rooted at page {root} point to the overflow chain at \
                 page {}",
                p.head
            )));
        }
        stats.overflow_pages += crate::lob::walk(pages, root.space, p, |_, _| {})? as usize;
    }
    Ok(stats)
}

/// Pages of overflow chains that no row's latest version names, after
/// checking each chain whole (`lob::walk`): those of the old versions the
/// unpurged undo records hold, and those of bundles in flight (written,
/// not yet referenced: `lob`), plus the overflow directory page. With the
/// trees' pages (`TreeStats::overflow_pages` included) and the undo
/// pages, every page in use is accounted for.
///
/// Two undo records may hold one version (an op's undo appended again by
/// a retry or by recovery: `lob`'s module doc), and purge frees the chain
/// at the first of them; until it passes the second, that one names a
/// chain that is gone. So an undo record's chain is checked only if its
/// head still holds it (readers never follow such a record: its commit is
/// below the purge limit), and counted once.
pub(crate) fn history_chain_pages<P: Pages>(pages: &P, space: u32) -> Result<u64> {
    let dir = crate::lob::dir_in_header(pages, space)?;
    let mut held = std::collections::BTreeSet::new();
    // An old value that is no version header (`check_history` reports
    // those) names no chain.
    crate::undo::check_space_visiting(pages, space, &mut |root, old| {
        if let Ok(v) = Version::decode(old, root) {
            held.extend(v.external.map(|p| (p.head, p.id, p.len)));
        }
    })?;
    let Some(dir) = dir else {
        return Ok(0);
    };
    let mut chains = std::collections::BTreeSet::new();
    for (head, id, len) in held {
        if crate::lob::holds(pages, space, Pointer { head, len, id })? {
            chains.insert((head, id, len));
        }
    }
    for first in crate::lob::Lobs::in_flight(pages, dir)? {
        for p in crate::lob::Lobs::bundle(pages, space, first)? {
            chains.insert((p.head, p.id, p.len));
        }
    }
    let mut n = 1;
    for (head, id, len) in chains {
        n += crate::lob::walk(pages, space, Pointer { head, len, id }, |_, _| {})?;
    }
    Ok(n)
}

/// Free the overflow chain a table's stored value owns, if it is external
/// (a [`crate::btree::bulk::FreeValue`] for a table's trees: drop,
/// truncate, a failed bulk load). Idempotent (`lob::free_chain`).
pub(crate) fn free_external(e: &crate::engine::Engine, stored: &[u8]) -> Result<()> {
    if let Some(p) = Version::decode(stored, 0)?.external {
        crate::lob::free_chain(e, crate::engine::admission::Purpose::New, p)?;
    }
    Ok(())
}

/// Encode a delete mark keeping `kept`, the inline value of the version it
/// replaces (empty where that one was external or a mark without bytes).
pub(crate) fn encode_mark(trx_no: u64, roll: RollPtr, kept: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + kept.len());
    out.push(DELETED);
    out.extend_from_slice(&trx_no.to_le_bytes());
    out.extend_from_slice(&roll.to_bytes());
    out.extend_from_slice(kept);
    out
}

/// What a delete mark replacing `before` keeps of it ([`encode_mark`]):
/// its inline value, nothing of an external one.
pub(crate) fn kept_by_mark<'a>(before: Option<&Version<'a>>) -> &'a [u8] {
    match before {
        Some(v) if v.external.is_none() => v.value,
        _ => &[],
    }
}

/// Encode a version: `value` `None` is a delete mark keeping nothing; with
/// `external`, `value` is a `lob::Pointer`'s bytes.
pub(crate) fn encode(trx_no: u64, roll: RollPtr, value: Option<&[u8]>, external: bool) -> Vec<u8> {
    let v = value.unwrap_or(&[]);
    let mut out = Vec::with_capacity(HEADER + v.len());
    out.push(match (value, external) {
        (None, _) => DELETED,
        (Some(_), true) => EXTERNAL,
        (Some(_), false) => 0,
    });
    out.extend_from_slice(&trx_no.to_le_bytes());
    out.extend_from_slice(&roll.to_bytes());
    out.extend_from_slice(v);
    out
}

/// The undo delta (`undo`'s module doc, "Deltas") that keeps the version
/// `old` (stored bytes) as a change of `new`, the bytes the version
/// a commit writes in its place keeps after its header (a delete mark's
/// kept value included); `None` where the whole version is kept instead:
/// - the new version is external (a reader following the record would hold
///   no inline bytes to rebuild from), or the old one is (purge frees an
///   old version's chain, and reads it from the record alone);
/// - or the delta would not be shorter than the version.
///
/// The head is the old version's header, whole. The base is the new
/// version's *value*, not its stored bytes: those carry the roll pointer
/// to this very record, which is not known until it is appended. A reader
/// that reaches the record from the new version holds that value
/// ([`rebuild_older`]); nothing changes a version's value while a roll
/// pointer names its record (a new value is a new version, purge removes a
/// row only once no view can reach its records, and recovery writes the
/// same bytes again).
pub(crate) fn undo_delta(old: &[u8], new: &[u8], new_external: bool) -> Option<Vec<u8>> {
    if new_external || old.len() < HEADER || old[0] & EXTERNAL != 0 {
        return None;
    }
    let (head, value) = old.split_at(HEADER);
    let max = value.len().min(new.len()).min(usize::from(u16::MAX));
    let prefix = value
        .iter()
        .zip(new)
        .take(max)
        .take_while(|(a, b)| a == b)
        .count();
    let suffix = value[prefix..]
        .iter()
        .rev()
        .zip(new[prefix..].iter().rev())
        .take(max - prefix)
        .take_while(|(a, b)| a == b)
        .count();
    let middle = &value[prefix..value.len() - suffix];
    let len = crate::undo::DELTA_HEADER + head.len() + middle.len();
    (len < old.len()).then(|| crate::undo::delta_encode(head, prefix, suffix, middle))
}

/// The stored bytes of the version an undo record keeps: `old` itself, or
/// with `delta`, rebuilt from the stored bytes `newer` of the version whose
/// roll pointer led to the record ([`undo_delta`]). An error names the
/// table when `newer` holds no inline bytes to rebuild from.
pub(crate) fn rebuild_older(old: Vec<u8>, delta: bool, newer: &[u8], root: u32) -> Result<Vec<u8>> {
    if !delta {
        return Ok(old);
    }
    let v = Version::decode(newer, root)?;
    if v.external.is_some() {
        return Err(Error::Corruption(format!(
            "an undo record of the table rooted at page {root} keeps its version as a delta \
             of a large version"
        )));
    }
    crate::undo::delta_apply(&old, v.value)
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
            let s = encode(no, roll, value.as_deref(), false);
            let v = Version::decode(&s, 7).unwrap();
            prop_assert_eq!(v.trx_no, no);
            prop_assert_eq!(v.roll, roll);
            prop_assert_eq!((!v.deleted).then_some(v.value), value.as_deref());
            prop_assert_eq!(v.external, None);
        }

        #[test]
        fn garbage_is_an_error_not_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = Version::decode(&bytes, 7);
        }
    }

    proptest! {
        /// A delta rebuilds the old version exactly from the new version's
        /// stored bytes, whatever the roll pointer written into them after
        /// the delta was taken, and is shorter than the version it keeps.
        #[test]
        fn an_undo_delta_rebuilds_the_old_version(
            old_value in proptest::collection::vec(0..4u8, 0..300),
            edits in proptest::collection::vec((any::<prop::sample::Index>(), 0..4u8, 0..3u8), 0..6),
            old_no in 1..u64::MAX,
            roll in any::<u32>(),
        ) {
            let mut new_value = old_value.clone();
            for (at, byte, how) in edits {
                let i = if new_value.is_empty() { 0 } else { at.index(new_value.len() + 1) };
                match how {
                    0 => new_value.insert(i, byte),
                    1 if i < new_value.len() => { new_value.remove(i); }
                    _ if i < new_value.len() => new_value[i] = byte,
                    _ => new_value.push(byte),
                }
            }
            let old = encode(old_no, RollPtr::new(roll, 7), Some(&old_value), false);
            if let Some(d) = undo_delta(&old, &new_value, false) {
                prop_assert!(d.len() < old.len());
                let newer = encode(old_no + 1, RollPtr::new(roll ^ 5, 9), Some(&new_value), false);
                prop_assert_eq!(rebuild_older(d, true, &newer, 3).unwrap(), old.clone());
            }
            prop_assert!(undo_delta(&old, &new_value, true).is_none(), "an external new value");
        }
    }

    #[test]
    fn a_small_change_of_a_long_row_keeps_only_the_change() {
        let row: Vec<u8> = (0..184u8).collect();
        let mut changed = row.clone();
        changed[1] ^= 0xff;
        let old = encode(10, RollPtr::new(4, 48), Some(&row), false);
        let d = undo_delta(&old, &changed, false).unwrap();
        assert_eq!(d.len(), crate::undo::DELTA_HEADER + HEADER + 1);
        // A delete keeps the old header alone: the mark keeps the bytes.
        let kept = Version::decode(&old, 3).unwrap();
        let mark = encode_mark(11, RollPtr::new(4, 50), kept_by_mark(Some(&kept)));
        let dm = undo_delta(&old, kept_by_mark(Some(&kept)), false).unwrap();
        assert_eq!(dm.len(), crate::undo::DELTA_HEADER + HEADER);
        assert_eq!(rebuild_older(dm, true, &mark, 3).unwrap(), old);
        // Not from a large value: no inline base.
        let p = Pointer {
            head: 9,
            len: 100_000,
            id: 3,
        };
        let large = encode(11, RollPtr::new(4, 48), Some(&p.to_bytes()), true);
        assert!(rebuild_older(d.clone(), true, &large, 3).is_err());
        // A base too short for what the delta keeps of it.
        let short = encode(11, RollPtr::new(4, 48), Some(&changed[..10]), false);
        assert!(rebuild_older(d, true, &short, 3).is_err());
        // The old version large or deleted: kept whole.
        let old_large = encode(9, RollPtr::NONE, Some(&p.to_bytes()), true);
        assert!(undo_delta(&old_large, &changed, false).is_none());
    }

    #[test]
    fn short_or_flagged_values_are_corruption() {
        assert!(Version::decode(&[0; 14], 3).is_err());
        let mut s = encode(1, RollPtr::NONE, Some(b"x"), false);
        s[0] = EXTERNAL;
        assert!(
            Version::decode(&s, 3).is_err(),
            "external without a pointer"
        );
        // A delete mark keeps the bytes it deleted, and is still no row.
        let s = encode_mark(1, RollPtr::NONE, b"x");
        let v = Version::decode(&s, 3).unwrap();
        assert!(v.deleted && v.value == b"x");
        let mut s = encode(1, RollPtr::NONE, Some(b"x"), false);
        s[0] = 4;
        assert!(Version::decode(&s, 3).is_err(), "unknown flag");
        let p = Pointer {
            head: 9,
            len: 100_000,
            id: 3,
        };
        let s = encode(1, RollPtr::NONE, Some(&p.to_bytes()), true);
        assert_eq!(Version::decode(&s, 3).unwrap().external, Some(p));
        let mut s = encode(1, RollPtr::NONE, Some(&p.to_bytes()), true);
        s[0] |= DELETED;
        assert!(
            Version::decode(&s, 3).is_err(),
            "a delete mark with a pointer"
        );
    }
}
