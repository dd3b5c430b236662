//! Undo records: the old versions of rows, stored in undo pages, for
//! consistent reads (a reader follows a record's roll pointer back to the
//! version it may see) and for purge (which removes what no reader can
//! see any more). This module stores and frees them; it knows nothing of
//! transactions, read views or the B+tree value layout: a record carries
//! a commit number, a table (its root page), a key and the old value (or
//! its absence) as opaque bytes. The transaction system decides what they
//! mean (InnoDB's `trx0undo`/`trx0rseg`/`trx0purge`, minus rollback:
//! Keel applies a transaction's writes only at commit, so undo is never
//! used to roll pages back).
//!
//! # Layout
//!
//! The undo directory page (type [`PageType::UndoDir`], named by the space
//! header's `UNDO_DIR` field) holds [`N_RSEGS`] rollback segments, each a
//! slot `{first page u32, last page u32}` at `32 + 8 i` (0 = empty list).
//! The undo pages of one rseg form a singly linked list from the oldest
//! (first) to the newest (last, the *tail*); records are only appended to
//! the tail. An undo page (type [`PageType::Undo`]), after the common
//! header:
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 32 | 4 | next page of the list (0 = none: the tail) |
//! | 36 | 2 | `used`: end of the last record |
//! | 38 | 2 | `purged`: the records before this offset are purged |
//! | 40 | 8 | `max_commit`: largest commit number of a record in the page |
//! | 48 | … | records, back to back, up to `used` |
//!
//! A record: total length u16, flags u8 (bit 0 `FIRST`: the first record
//! of its commit in this rseg; bit 1 `ABSENT`: there was no old value; bit
//! 2 `DEL_MARK`: the commit delete-marked the row, which purge removes;
//! bit 3 `DELTA`: the old value is a delta, below), commit u64, root u32,
//! key length u16, key, old-value length u32, old value (length 0 when
//! `ABSENT`); [`RECORD_HEADER`] bytes plus the key and the value.
//!
//! # Deltas
//!
//! An update usually changes a few bytes of a row (InnoDB's undo keeps
//! only the changed fields, its "update vector"). A `DELTA` record keeps
//! the old value as a change of a *base*: bytes of the version that
//! replaced it, which whoever follows the record has in hand, since it
//! came to the record from that version. The delta is `head length u8,
//! prefix u16, suffix u16, head, middle` ([`DELTA_HEADER`] bytes, then the
//! head and the middle), and the old value is `head ++ base[..prefix] ++
//! middle ++ base[len - suffix..]` ([`delta_apply`]). This module treats
//! both as bytes; the transaction system chooses the head and the base
//! (the newer version's value), and guarantees that the base a reader
//! holds is the one the delta was taken against
//! (`txn::version::undo_delta`). A binary that predates deltas refuses
//! such a record (unknown flag) rather than misread it.
//!
//! A [`RollPtr`] names a record by page number and offset. Offsets are
//! u16, so a page of 64 KiB uses its first 65535 bytes. The const asserts
//! below prove that the largest record (a key of `max_key_len`, a value of
//! `max_value_len`) fits in an empty undo page of every page size; a delta
//! is written only where it is shorter than the value it stands for.
//!
//! # Threads
//!
//! See [`UndoSpace`]: appends of one rseg are serialised by its append
//! mutex, purges of one rseg by its purge mutex; every page change is a
//! mini-transaction, logged like any other, so recovery restores the lists
//! and [`UndoSpace::open`] learns the tails and the history length from
//! the pages.

// Until the transaction system holds an `UndoSpace`, only the tests and
// the checkers use most of this module.

mod check;
mod space;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod prop_tests;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;

pub use check::UndoCheck;
pub(crate) use check::{check_lists, check_space, check_space_visiting};
#[cfg_attr(not(test), allow(unused_imports))]
pub(crate) use space::{PurgeStep, UndoSpace};

use crate::btree::node::{max_key_len, max_value_len};
use crate::engine::space_header as sh;
use crate::error::{Error, Result};
use crate::mtr::Mtr;
use crate::page::{
    get_u16, get_u32, get_u64, put_u16, put_u32, put_u64, PageId, PageType, MAX_PAGE_SIZE,
    PAGE_HEADER_SIZE,
};

/// Rollback segments in the directory.
pub(crate) const N_RSEGS: usize = 8;

/// Directory page: the slot of rseg `i` is at `DIR_SLOTS + 8 i`: first
/// page u32, last page u32.
const DIR_SLOTS: usize = PAGE_HEADER_SIZE;
/// Undo page: the next page of the list.
const NEXT: usize = PAGE_HEADER_SIZE;
/// Undo page: end of the last record.
const USED: usize = PAGE_HEADER_SIZE + 4;
/// Undo page: records before this offset are purged.
const PURGED: usize = PAGE_HEADER_SIZE + 6;
/// Undo page: largest commit number of a record in the page.
const MAX_COMMIT: usize = PAGE_HEADER_SIZE + 8;
/// Undo page: where the records start.
pub(crate) const RECORDS_START: usize = PAGE_HEADER_SIZE + 16;

/// Bytes of a record before its key: length, flags, commit, root, key
/// length; and the old value's length after the key.
pub(crate) const RECORD_HEADER: usize = 2 + 1 + 8 + 4 + 2 + 4;
const REC_FLAGS: usize = 2;
const REC_COMMIT: usize = 3;
const REC_ROOT: usize = 11;
const REC_KEY_LEN: usize = 15;
const REC_KEY: usize = 17;

/// Record flag: the first record of its commit in this rseg.
const FLAG_FIRST: u8 = 1;
/// Record flag: there was no old value.
const FLAG_ABSENT: u8 = 2;
/// Record flag: the commit replaced the old value with a delete mark.
const FLAG_DEL_MARK: u8 = 4;
/// Record flag: the old value is a delta against its base (module doc).
const FLAG_DELTA: u8 = 8;

/// Bytes of a delta before its head: head length, prefix, suffix.
pub(crate) const DELTA_HEADER: usize = 1 + 2 + 2;

/// Encode the delta `head ++ base[..prefix] ++ middle ++ base[len -
/// suffix..]` (module doc, "Deltas"). The caller keeps the head under 256
/// bytes and the prefix and suffix under 65536.
pub(crate) fn delta_encode(head: &[u8], prefix: usize, suffix: usize, middle: &[u8]) -> Vec<u8> {
    debug_assert!(head.len() <= usize::from(u8::MAX));
    debug_assert!(prefix <= usize::from(u16::MAX) && suffix <= usize::from(u16::MAX));
    let mut out = Vec::with_capacity(DELTA_HEADER + head.len() + middle.len());
    out.push(head.len() as u8);
    out.extend_from_slice(&(prefix as u16).to_le_bytes());
    out.extend_from_slice(&(suffix as u16).to_le_bytes());
    out.extend_from_slice(head);
    out.extend_from_slice(middle);
    out
}

/// The value a delta stands for, given its base; an error when the delta
/// is malformed or asks for more of the base than there is (a base that
/// is not the one the delta was taken against).
pub(crate) fn delta_apply(delta: &[u8], base: &[u8]) -> Result<Vec<u8>> {
    let bad = |what: String| Err(Error::Corruption(format!("undo delta: {what}")));
    if delta.len() < DELTA_HEADER {
        return bad(format!("{} bytes, shorter than its header", delta.len()));
    }
    let head_len = usize::from(delta[0]);
    let prefix = usize::from(get_u16(delta, 1));
    let suffix = usize::from(get_u16(delta, 3));
    let Some(middle) = delta.get(DELTA_HEADER + head_len..) else {
        return bad(format!(
            "a head of {head_len} bytes runs past its {} bytes",
            delta.len()
        ));
    };
    if prefix + suffix > base.len() {
        return bad(format!(
            "keeps {prefix} + {suffix} bytes of a base of only {}",
            base.len()
        ));
    }
    let head = &delta[DELTA_HEADER..DELTA_HEADER + head_len];
    let mut out = Vec::with_capacity(head_len + prefix + middle.len() + suffix);
    out.extend_from_slice(head);
    out.extend_from_slice(&base[..prefix]);
    out.extend_from_slice(middle);
    out.extend_from_slice(&base[base.len() - suffix..]);
    Ok(out)
}

/// End of the usable part of an undo page of `ps` bytes (offsets are u16).
pub(crate) const fn page_end(ps: usize) -> usize {
    if ps > u16::MAX as usize {
        u16::MAX as usize
    } else {
        ps
    }
}

/// Bytes of the largest record a page of `ps` bytes must take.
pub(crate) const fn max_record_len(ps: usize) -> usize {
    RECORD_HEADER + max_key_len(ps) + max_value_len(ps)
}

/// Every supported page size takes the largest record in an empty page.
const fn every_page_size_fits() -> bool {
    let mut ps = crate::page::MIN_PAGE_SIZE;
    while ps <= MAX_PAGE_SIZE {
        if RECORDS_START + max_record_len(ps) > page_end(ps) || max_record_len(ps) > 0xffff {
            return false;
        }
        ps *= 2;
    }
    true
}
const _: () = assert!(every_page_size_fits());
const _: () = assert!(RECORDS_START + max_record_len(4096) <= page_end(4096));
const _: () = assert!(RECORDS_START + max_record_len(65536) <= page_end(65536));
const _: () = assert!(DIR_SLOTS + 8 * N_RSEGS <= crate::page::MIN_PAGE_SIZE);

/// A pointer to an undo record: page number (32 bits) and offset in the
/// page (16 bits); 0 is "none". Stored in 6 bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default)]
pub(crate) struct RollPtr(u64);

impl RollPtr {
    /// No record.
    pub const NONE: RollPtr = RollPtr(0);

    /// The record at `offset` of page `page_no`.
    pub fn new(page_no: u32, offset: u16) -> RollPtr {
        RollPtr((u64::from(page_no) << 16) | u64::from(offset))
    }

    /// The page holding the record.
    pub fn page_no(self) -> u32 {
        (self.0 >> 16) as u32
    }

    /// The record's offset in its page.
    pub fn offset(self) -> u16 {
        self.0 as u16
    }

    /// Whether this is [`RollPtr::NONE`].
    pub fn is_none(self) -> bool {
        self.0 == 0
    }

    /// The pointer as a number (48 bits used).
    pub fn raw(self) -> u64 {
        self.0
    }

    /// The 6 stored bytes: page number then offset, little-endian.
    pub fn to_bytes(self) -> [u8; 6] {
        let mut b = [0u8; 6];
        b[..4].copy_from_slice(&self.page_no().to_le_bytes());
        b[4..].copy_from_slice(&self.offset().to_le_bytes());
        b
    }

    /// Decode [`RollPtr::to_bytes`]; bytes past the sixth are ignored, a
    /// shorter slice is padded with zeros (it then names a page that the
    /// reader will reject, never a panic).
    pub fn from_bytes(b: &[u8]) -> RollPtr {
        let mut a = [0u8; 6];
        let n = b.len().min(6);
        a[..n].copy_from_slice(&b[..n]);
        let page = u32::from_le_bytes([a[0], a[1], a[2], a[3]]);
        RollPtr::new(page, u16::from_le_bytes([a[4], a[5]]))
    }
}

/// An undo record, borrowed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct UndoRecord<'a> {
    /// The first record of its commit in this rseg (counted in the history).
    pub first: bool,
    /// The commit delete-marked the row (purge removes the mark).
    pub del_mark: bool,
    /// The commit number of the transaction that replaced the old value.
    pub commit: u64,
    /// The table: its root page number.
    pub root: u32,
    /// The row's key.
    pub key: &'a [u8],
    /// The value before the commit (`None`: the row did not exist), or
    /// with `delta`, the delta that rebuilds it from its base.
    pub old: Option<&'a [u8]>,
    /// `old` is a delta (module doc, "Deltas").
    pub delta: bool,
}

/// An undo record, owned (what [`UndoSpace::read`] and purge hand out).
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct OwnedUndo {
    /// See [`UndoRecord::first`].
    pub first: bool,
    /// See [`UndoRecord::del_mark`].
    pub del_mark: bool,
    /// See [`UndoRecord::commit`].
    pub commit: u64,
    /// See [`UndoRecord::root`].
    pub root: u32,
    /// See [`UndoRecord::key`].
    pub key: Vec<u8>,
    /// See [`UndoRecord::old`].
    pub old: Option<Vec<u8>>,
    /// See [`UndoRecord::delta`].
    pub delta: bool,
}

impl OwnedUndo {
    /// The record, borrowed.
    #[cfg(test)]
    pub fn as_record(&self) -> UndoRecord<'_> {
        UndoRecord {
            first: self.first,
            del_mark: self.del_mark,
            commit: self.commit,
            root: self.root,
            key: &self.key,
            old: self.old.as_deref(),
            delta: self.delta,
        }
    }
}

impl UndoRecord<'_> {
    /// Bytes the record takes in a page.
    pub fn encoded_len(&self) -> usize {
        RECORD_HEADER + self.key.len() + self.old.map_or(0, <[u8]>::len)
    }

    /// The owned copy.
    pub fn to_owned(self) -> OwnedUndo {
        OwnedUndo {
            first: self.first,
            del_mark: self.del_mark,
            commit: self.commit,
            root: self.root,
            key: self.key.to_vec(),
            old: self.old.map(<[u8]>::to_vec),
            delta: self.delta,
        }
    }

    /// Write the record at `b[..encoded_len()]`.
    fn encode(&self, b: &mut [u8]) {
        let len = self.encoded_len();
        put_u16(b, 0, len as u16);
        let flags = if self.first { FLAG_FIRST } else { 0 }
            | if self.old.is_none() { FLAG_ABSENT } else { 0 }
            | if self.del_mark { FLAG_DEL_MARK } else { 0 }
            | if self.delta { FLAG_DELTA } else { 0 };
        b[REC_FLAGS] = flags;
        put_u64(b, REC_COMMIT, self.commit);
        put_u32(b, REC_ROOT, self.root);
        put_u16(b, REC_KEY_LEN, self.key.len() as u16);
        let k = REC_KEY + self.key.len();
        b[REC_KEY..k].copy_from_slice(self.key);
        let old = self.old.unwrap_or_default();
        put_u32(b, k, old.len() as u32);
        b[k + 4..k + 4 + old.len()].copy_from_slice(old);
    }
}

/// Decode the record at `off` of undo page `page` (`used` its end of
/// records, checked by the caller against the page); `id` names the page
/// in errors. Checks the framing: never panics, whatever the bytes.
fn decode(page: &[u8], id: PageId, off: usize, used: usize) -> Result<(UndoRecord<'_>, usize)> {
    let bad = |what: String| {
        Err(Error::Corruption(format!(
            "undo page {id}, record at offset {off}: {what}"
        )))
    };
    if off < RECORDS_START || off + RECORD_HEADER > used || used > page.len() {
        return bad(format!(
            "outside the records [{RECORDS_START}, {used}) of the page"
        ));
    }
    let len = usize::from(get_u16(page, off));
    let flags = page[off + REC_FLAGS];
    let key_len = usize::from(get_u16(page, off + REC_KEY_LEN));
    if len < RECORD_HEADER || off + len > used {
        return bad(format!("length {len} runs past the records' end {used}"));
    }
    if flags & !(FLAG_FIRST | FLAG_ABSENT | FLAG_DEL_MARK | FLAG_DELTA) != 0 {
        return bad(format!("unknown flags {flags:#x}"));
    }
    if RECORD_HEADER + key_len > len {
        return bad(format!(
            "key of {key_len} bytes does not fit its length {len}"
        ));
    }
    let k = off + REC_KEY + key_len;
    let old_len = get_u32(page, k) as usize;
    if RECORD_HEADER + key_len + old_len != len {
        return bad(format!(
            "key of {key_len} and old value of {old_len} bytes do not add up to its length {len}"
        ));
    }
    let absent = flags & FLAG_ABSENT != 0;
    if absent && old_len != 0 {
        return bad(format!("no old value, but an old length of {old_len}"));
    }
    let delta = flags & FLAG_DELTA != 0;
    if delta && (absent || old_len < DELTA_HEADER) {
        return bad(format!(
            "a delta of {old_len} bytes (absent: {absent}), shorter than a delta's header"
        ));
    }
    let rec = UndoRecord {
        first: flags & FLAG_FIRST != 0,
        del_mark: flags & FLAG_DEL_MARK != 0,
        commit: get_u64(page, off + REC_COMMIT),
        root: get_u32(page, off + REC_ROOT),
        key: &page[off + REC_KEY..k],
        old: (!absent).then(|| &page[k + 4..k + 4 + old_len]),
        delta,
    };
    Ok((rec, off + len))
}

/// The header fields of an undo page: next, used, purged, max commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PageHead {
    next: u32,
    used: usize,
    purged: usize,
    max_commit: u64,
}

/// Read and check the header of undo page `page` (`id`): its type, and
/// `RECORDS_START ≤ purged ≤ used ≤ page_end`.
fn page_head(page: &[u8], id: PageId) -> Result<PageHead> {
    let t = crate::page::page_type(page);
    if t != Some(PageType::Undo) || crate::page::page_id(page) != id {
        return Err(Error::Corruption(format!(
            "undo page {id}: the header says page {} of type {t:?}",
            crate::page::page_id(page)
        )));
    }
    let h = PageHead {
        next: get_u32(page, NEXT),
        used: usize::from(get_u16(page, USED)),
        purged: usize::from(get_u16(page, PURGED)),
        max_commit: get_u64(page, MAX_COMMIT),
    };
    if h.purged < RECORDS_START || h.purged > h.used || h.used > page_end(page.len()) {
        return Err(Error::Corruption(format!(
            "undo page {id}: purged offset {} and used offset {} (at offsets {PURGED} and \
             {USED}) are not ordered within [{RECORDS_START}, {}]",
            h.purged,
            h.used,
            page_end(page.len())
        )));
    }
    Ok(h)
}

/// Initialise a freshly allocated page as an empty undo page.
fn init_undo_page(p: &mut [u8]) {
    put_u32(p, NEXT, 0);
    reset_undo_page(p);
}

/// Make an undo page empty (its `next` kept).
fn reset_undo_page(p: &mut [u8]) {
    put_u16(p, USED, RECORDS_START as u16);
    put_u16(p, PURGED, RECORDS_START as u16);
    put_u64(p, MAX_COMMIT, 0);
}

/// Slot `rseg` of the directory page: (first, last).
fn dir_slot(dir: &[u8], rseg: usize) -> (u32, u32) {
    let off = DIR_SLOTS + 8 * rseg;
    (get_u32(dir, off), get_u32(dir, off + 4))
}

fn set_dir_slot(dir: &mut [u8], rseg: usize, first: u32, last: u32) {
    let off = DIR_SLOTS + 8 * rseg;
    put_u32(dir, off, first);
    put_u32(dir, off + 4, last);
}

/// Check the directory page `dir` (`id`): type and identity.
fn check_dir(dir: &[u8], id: PageId) -> Result<()> {
    let t = crate::page::page_type(dir);
    if t != Some(PageType::UndoDir) || crate::page::page_id(dir) != id {
        return Err(Error::Corruption(format!(
            "undo directory page {id}: the header says page {} of type {t:?}",
            crate::page::page_id(dir)
        )));
    }
    Ok(())
}

/// Allocate and initialise the undo directory page (every rseg empty) in
/// `mtr`, and record it in the space header; returns its page number. Used
/// when a space is laid out (`db::open::format_space`): the caller's
/// budget covers the new page and the header.
pub(crate) fn create_undo_dir(mtr: &mut Mtr<'_>) -> Result<u32> {
    mtr.latch_header()?;
    let dir = mtr.alloc_page(PageType::UndoDir)?;
    let no = dir.id().page_no;
    mtr.keep(dir);
    mtr.set_header_u32(sh::UNDO_DIR, no)?;
    Ok(no)
}
