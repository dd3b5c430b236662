//! Redo log on-disk encoding: file header, checkpoint slots, record groups
//! and page-change records. See docs/format.md, "Redo log".
//!
//! The file header and the checkpoint slots are sealed headers ([`Seal`]).
//! Every decoder here accepts any bytes: what it cannot make sense of is an
//! error (or, for a group, the end of the log), never a panic, and a file
//! header that decodes has a geometry the log can be addressed with.

use serde::Serialize;

use super::START_LSN;
use crate::page::coding::{put_varint, unzigzag, varint_len, zigzag, Reader, Seal};
use crate::page::Lsn;
use crate::page::{get_u32, get_u64, put_u32, put_u64};

/// Magic at the start of every redo log file.
pub const LOG_MAGIC: &[u8; 8] = b"KEELREDO";
/// Redo format version, written in every log file's header: 2 since the
/// compact framing (12-byte group headers, varint page records). A log of
/// version 1 ([`LOG_VERSION_V1`]) is opened only when it has nothing to
/// recover, and its headers are rewritten before anything is appended
/// (`Log::open`); a Keel that predates version 2 refuses a log of it.
pub const LOG_VERSION: u32 = 2;
/// The redo format version before the compact framing: 20-byte group
/// headers that store their LSN, fixed-width page records.
pub const LOG_VERSION_V1: u32 = 1;
/// Bytes reserved at the start of every log file: file header block and
/// two checkpoint slot blocks (used in file 0 only).
pub const LOG_FILE_HDR: u64 = 3 * 4096;
/// Offsets of the two checkpoint slots in file 0.
pub const CHECKPOINT_SLOTS: [u64; 2] = [4096, 8192];
/// Bytes of a record-group header: `len u32, kind u8, epoch u24, lsn_lo
/// u32, crc u32`.
pub const GROUP_HDR: usize = 16;
/// Bytes of a record-group header of version 1 (`LOG_VERSION_V1`): `len
/// u32, kind u8, epoch u24, lsn u64, crc u32`.
pub const GROUP_HDR_V1: usize = 20;
/// Bytes of the log file header that carry meaning (CRC included).
pub const LOG_HEADER_LEN: usize = 40;
/// Bytes of a checkpoint slot that carry meaning (CRC included).
pub const CHECKPOINT_LEN: usize = 32;
/// Bytes of a checkpoint slot written before slots carried the epoch: `no
/// u64, lsn u64, crc u32`. Still read (as epoch 0), never written.
pub const CHECKPOINT_LEN_V1: usize = 20;
/// The bits of an epoch a group header stores (its 3 bytes).
pub const GROUP_EPOCH_MASK: u32 = 0x00ff_ffff;
/// Smallest log file (the `log_file_size` option's limit).
pub const MIN_LOG_FILE_SIZE: u64 = 1 << 20;
/// Log files are a whole number of these (the `log_file_size` option's rule).
pub const LOG_FILE_ALIGN: u64 = 4096;
/// Most log files in a group (the `log_files_in_group` option's limit).
pub const MAX_LOG_FILES: u32 = 100;

/// The version is not the seal's: a log file header of either version
/// opens, and [`LogFileHeader::decode`] judges the version.
const HEADER_SEAL: Seal = Seal {
    what: "log file header",
    kind: "Keel redo log file",
    magic: LOG_MAGIC,
    version: None,
};
const CHECKPOINT_SEAL: Seal = Seal {
    what: "checkpoint slot",
    kind: "checkpoint slot",
    magic: b"",
    version: None,
};

const _: () = assert!(HEADER_SEAL.body_at() == 8 && CHECKPOINT_SEAL.body_at() == 0);
const _: () =
    assert!(LOG_FILE_HDR < MIN_LOG_FILE_SIZE && MIN_LOG_FILE_SIZE.is_multiple_of(LOG_FILE_ALIGN));
const _: () = assert!(CHECKPOINT_SLOTS[1] + CHECKPOINT_LEN as u64 <= LOG_FILE_HDR);

/// Group kinds.
pub mod kind {
    /// Physical page changes of one mini-transaction.
    pub const MTR: u8 = 1;
    /// A transaction's logical commit record (its whole write set).
    pub const TXN_COMMIT: u8 = 2;
    /// The write set of the commit at the given LSN reached every page.
    pub const TXN_APPLIED: u8 = 3;
    /// Copies of every in-flight commit record, so the checkpoint may pass
    /// their originals (see `redo::inflight`).
    pub const TXN_RELOCATED: u8 = 4;
}

/// The header block of a log file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LogFileHeader {
    /// Redo format version ([`LOG_VERSION`], or [`LOG_VERSION_V1`] in a
    /// log written before the compact framing).
    pub version: u32,
    /// Index of the file in the group.
    pub file_index: u32,
    /// Files in the group.
    pub n_files: u32,
    /// Size of each file in bytes.
    pub file_size: u64,
    /// The data files' creation id: ties the log to its database.
    pub creation_id: u64,
}

impl LogFileHeader {
    /// Encode into `b` (≥ [`LOG_HEADER_LEN`] bytes).
    pub fn encode(&self, b: &mut [u8]) {
        HEADER_SEAL.seal(b, LOG_HEADER_LEN - 4, |b| {
            put_u32(b, 8, self.version);
            put_u32(b, 12, self.file_index);
            put_u32(b, 16, self.n_files);
            put_u64(b, 20, self.file_size);
            put_u64(b, 28, self.creation_id);
        });
    }

    /// Decode and check, geometry included: a header that decodes has a
    /// data area (`file_size − LOG_FILE_HDR`) of at least one byte and a
    /// capacity over its `n_files` files that fits a u64. The error says
    /// what is wrong.
    pub fn decode(b: &[u8]) -> Result<LogFileHeader, String> {
        HEADER_SEAL.open(b, LOG_HEADER_LEN - 4)?;
        let version = get_u32(b, 8);
        if version != LOG_VERSION && version != LOG_VERSION_V1 {
            return Err(format!(
                "log file header format version {version}, this build reads versions \
                 {LOG_VERSION_V1} and {LOG_VERSION}"
            ));
        }
        let h = LogFileHeader {
            version,
            file_index: get_u32(b, 12),
            n_files: get_u32(b, 16),
            file_size: get_u64(b, 20),
            creation_id: get_u64(b, 28),
        };
        h.check_geometry()?;
        Ok(h)
    }

    /// The rules `Options::validate` puts on `log_file_size` and
    /// `log_files_in_group`, which every log was created with.
    fn check_geometry(&self) -> Result<(), String> {
        if self.file_size < MIN_LOG_FILE_SIZE || !self.file_size.is_multiple_of(LOG_FILE_ALIGN) {
            return Err(format!(
                "log file size {} is not a multiple of {LOG_FILE_ALIGN} of at least {MIN_LOG_FILE_SIZE}",
                self.file_size
            ));
        }
        if !(1..=MAX_LOG_FILES).contains(&self.n_files) {
            return Err(format!(
                "{} log files: a group has 1..={MAX_LOG_FILES}",
                self.n_files
            ));
        }
        if self.file_index >= self.n_files {
            return Err(format!(
                "file index {} of only {} log files",
                self.file_index, self.n_files
            ));
        }
        let area = self.file_size - LOG_FILE_HDR;
        if area.checked_mul(u64::from(self.n_files)).is_none() {
            return Err(format!(
                "{} log files of {} bytes overflow the LSN space",
                self.n_files, self.file_size
            ));
        }
        Ok(())
    }
}

/// One checkpoint slot: where recovery starts, and the *epoch* of the
/// run that wrote it, which tells recovery where that run's groups begin.
///
/// Every open that may write takes a new epoch (one more than the slot's)
/// and records it, with the LSN its appends start from, in a slot synced
/// before its first append (`Log::begin_epoch`). Every group carries the
/// low 24 bits of its run's epoch. So a group at or past `epoch_lsn` was
/// written by this run only if its epoch is `epoch`: a valid group of an
/// earlier run lying there (a later write of a crashed run survived while
/// an earlier one was lost, and the log recovered to the hole) is the end
/// of the log, never history. See [`Checkpoint::admits`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Checkpoint {
    /// Monotonic checkpoint number; the valid slot with the larger one wins.
    pub no: u64,
    /// Recovery starts reading the log here.
    pub lsn: Lsn,
    /// The epoch of the run that wrote this slot (0 in a slot of the
    /// earlier 20-byte layout, whose groups all carry 0).
    pub epoch: u32,
    /// Where that run's first group starts: groups at or past it carry
    /// `epoch` (0 in the earlier layout: every group must carry 0).
    pub epoch_lsn: Lsn,
}

impl Checkpoint {
    /// Encode into `b` (≥ [`CHECKPOINT_LEN`] bytes).
    pub fn encode(&self, b: &mut [u8]) {
        CHECKPOINT_SEAL.seal(b, CHECKPOINT_LEN - 4, |b| {
            put_u64(b, 0, self.no);
            put_u64(b, 8, self.lsn);
            put_u64(b, 16, self.epoch_lsn);
            put_u32(b, 24, self.epoch);
        });
    }

    /// Is a group that decoded at `lsn` with `epoch` (as stored: 24 bits)
    /// part of the history this checkpoint continues? Below `epoch_lsn`
    /// any epoch is (an earlier run wrote it, and the run that wrote this
    /// slot replayed it); from `epoch_lsn` on only this run's epoch is.
    pub fn admits(&self, lsn: Lsn, epoch: u32) -> bool {
        lsn < self.epoch_lsn || epoch == self.epoch & GROUP_EPOCH_MASK
    }

    /// Decode; None when the slot is empty or invalid ([`Checkpoint::open`]
    /// says why).
    pub fn decode(b: &[u8]) -> Option<Checkpoint> {
        Checkpoint::open(b).ok()
    }

    /// Decode, saying why a slot is not valid: empty, short, bad checksum,
    /// number 0, or an LSN before the first LSN of every log.
    pub fn open(b: &[u8]) -> Result<Checkpoint, String> {
        if b.get(..CHECKPOINT_LEN_V1)
            .is_some_and(|s| s.iter().all(|&x| x == 0))
        {
            return Err("checkpoint slot is empty (never written)".into());
        }
        let cp = match CHECKPOINT_SEAL.open(b, CHECKPOINT_LEN - 4) {
            Ok(()) => Checkpoint::stored(b),
            // A slot of the earlier layout: no epoch, and its groups carry
            // none (their 3 bytes were reserved, zero).
            Err(e) => match CHECKPOINT_SEAL.open(b, CHECKPOINT_LEN_V1 - 4) {
                Ok(()) => Checkpoint {
                    epoch: 0,
                    epoch_lsn: 0,
                    ..Checkpoint::stored(b)
                },
                Err(_) => return Err(e),
            },
        };
        if cp.no == 0 {
            return Err("checkpoint number 0 (numbers start at 1)".into());
        }
        if cp.lsn < START_LSN {
            return Err(format!(
                "checkpoint LSN {} is before the log's first LSN {START_LSN}",
                cp.lsn
            ));
        }
        Ok(cp)
    }

    /// The fields as stored, valid or not (zero where `b` is short): what
    /// an inspection shows of a slot.
    pub fn stored(b: &[u8]) -> Checkpoint {
        let field = |off: usize| b.get(off..off + 8).map_or(0, |s| get_u64(s, 0));
        Checkpoint {
            no: field(0),
            lsn: field(8),
            epoch_lsn: field(16),
            epoch: b.get(24..28).map_or(0, |s| get_u32(s, 0)),
        }
    }
}

/// Header of a record group: `len u32, kind u8, epoch u24, lsn_lo u32, crc
/// u32`, where `lsn_lo` is the low 32 bits of the group's LSN, the CRC32C
/// covers the whole LSN (8 bytes, little-endian), the first 12 header
/// bytes and the payload, and `epoch` is the low 24 bits of the writing
/// run's epoch (see [`Checkpoint`]).
///
/// A group read at another LSN than it was written at (left there by an
/// earlier lap of the log) fails the checksum, whatever its low bits say.
/// They are there so that a reader stops at such a group before it reads
/// the length it claims (recovery's reader, `redo::recovery`): garbage
/// passes them once in 2³², and an earlier lap's group only where the
/// log's capacity is a multiple of 4 GiB, and then its length is its own.
/// Version 1 stored the whole LSN (4 more bytes a group, [`GROUP_HDR_V1`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupHeader {
    /// Payload length.
    pub len: u32,
    /// Group kind ([`kind`]).
    pub kind: u8,
    /// LSN of the group's first byte.
    pub lsn: Lsn,
    /// The low 24 bits of the epoch of the run that wrote it.
    pub epoch: u32,
}

/// The CRC32C a group at `lsn` with header `h` (its first 12 bytes) and
/// `payload` carries.
fn group_crc(lsn: Lsn, h: &[u8], payload: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&lsn.to_le_bytes());
    let crc = crc32c::crc32c_append(crc, &h[..12]);
    crc32c::crc32c_append(crc, payload)
}

/// Whether a group header `h` may have been written at `lsn`: its low 32
/// bits match (the checksum decides; see [`GroupHeader`]).
pub fn group_at(h: &[u8], lsn: Lsn) -> bool {
    h.len() >= GROUP_HDR && get_u32(h, 8) == lsn as u32
}

/// Encode a whole group (header + payload) starting at `lsn`, written by
/// the run of `epoch` (its low 24 bits are stored).
///
/// # Panics
/// If the payload does not fit the u32 length field (the log buffer
/// refuses such a group long before).
pub fn encode_group(kind: u8, lsn: Lsn, epoch: u32, payload: &[u8], out: &mut Vec<u8>) {
    let Ok(len) = u32::try_from(payload.len()) else {
        panic!(
            "a {}-byte group payload does not fit its length field",
            payload.len()
        );
    };
    let start = out.len();
    out.resize(start + GROUP_HDR, 0);
    let h = &mut out[start..];
    put_u32(h, 0, len);
    h[4] = kind;
    h[5..8].copy_from_slice(&(epoch & GROUP_EPOCH_MASK).to_le_bytes()[..3]);
    put_u32(h, 8, lsn as u32);
    let crc = group_crc(lsn, h, payload);
    put_u32(&mut out[start..], 12, crc);
    out.extend_from_slice(payload);
}

/// Decode the group at the start of `b`, expected to begin at `lsn`.
/// None when it is not a complete, valid group written at that LSN (the
/// end of the log: garbage from an earlier lap, or a torn tail). The kind is
/// not judged here: a valid group of an unknown kind is returned, for the
/// caller to refuse rather than mistake for the end of the log. Nor is the
/// epoch: whether the group belongs to the history is the checkpoint's
/// call ([`Checkpoint::admits`]).
pub fn decode_group(b: &[u8], lsn: Lsn) -> Option<(GroupHeader, &[u8])> {
    let h = b.get(..GROUP_HDR)?;
    if !group_at(h, lsn) {
        return None;
    }
    let len = get_u32(h, 0);
    let end = GROUP_HDR.checked_add(usize::try_from(len).ok()?)?;
    let payload = b.get(GROUP_HDR..end)?;
    if group_crc(lsn, h, payload) != get_u32(h, 12) {
        return None;
    }
    Some((GroupHeader::read(h, lsn), payload))
}

impl GroupHeader {
    /// The fields both versions keep at the same offsets: `len u32, kind
    /// u8, epoch u24`, of a group that decoded at `lsn`.
    fn read(h: &[u8], lsn: Lsn) -> GroupHeader {
        GroupHeader {
            len: get_u32(h, 0),
            kind: h[4],
            lsn,
            epoch: u32::from_le_bytes([h[5], h[6], h[7], 0]),
        }
    }
}

/// [`decode_group`] for a log of version 1 ([`LOG_VERSION_V1`]): `len u32,
/// kind u8, epoch u24, lsn u64, crc u32` ([`GROUP_HDR_V1`] bytes), the CRC
/// over the first 16 bytes and the payload. Only read to tell whether such
/// a log has anything to recover (`Log::open`, `keel inspect`).
pub fn decode_group_v1(b: &[u8], lsn: Lsn) -> Option<(GroupHeader, &[u8])> {
    let h = b.get(..GROUP_HDR_V1)?;
    if get_u64(h, 8) != lsn {
        return None;
    }
    let len = get_u32(h, 0);
    let end = GROUP_HDR_V1.checked_add(usize::try_from(len).ok()?)?;
    let payload = b.get(GROUP_HDR_V1..end)?;
    let crc = crc32c::crc32c_append(crc32c::crc32c(&h[..16]), payload);
    if crc != get_u32(h, 16) {
        return None;
    }
    Some((GroupHeader::read(h, lsn), payload))
}

/// A version-1 group (for tests of the upgrade from it).
#[cfg(test)]
pub fn encode_group_v1(kind: u8, lsn: Lsn, epoch: u32, payload: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + GROUP_HDR_V1, 0);
    let h = &mut out[start..];
    put_u32(h, 0, payload.len() as u32);
    h[4] = kind;
    h[5..8].copy_from_slice(&(epoch & GROUP_EPOCH_MASK).to_le_bytes()[..3]);
    put_u64(h, 8, lsn);
    let crc = crc32c::crc32c_append(crc32c::crc32c(&h[..16]), payload);
    put_u32(&mut out[start..], 16, crc);
    out.extend_from_slice(payload);
}

/// Flag of a page record: zero the page before applying its entries.
pub const PAGE_ZEROED: u8 = 1;
/// Longest byte range in one page record entry, and longest move.
pub(crate) const MAX_RANGE: usize = 32 * 1024;
/// Most bytes a page record's header takes: space and page number
/// (varints of u32s, 5 bytes each), flags, entry count (a varint under
/// 65536, 3 bytes).
pub(crate) const PAGE_RECORD_HDR_MAX: usize = 14;
/// Most bytes a byte entry's header takes: its tag (a varint of at most
/// `2 × MAX_RANGE`, 3 bytes) and its offset's distance from the previous
/// entry's end (a zigzag varint of at most twice the largest page, 3
/// bytes).
pub(crate) const RANGE_HDR_MAX: usize = 6;
/// Most bytes a move entry takes: its tag, its destination's distance
/// from the previous entry's end, its source's from its destination.
const MOVE_ENTRY_MAX: usize = 9;
/// Largest distance varint an entry may carry: twice the largest page.
const MAX_DISTANCE: u64 = 2 * crate::page::MAX_PAGE_SIZE as u64 + 1;
const _: () = assert!(varint_len(MAX_DISTANCE) <= 3 && varint_len(2 * MAX_RANGE as u64 + 1) <= 3);

/// One change of a page record, applied in order to the page as it stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Bytes `[start, end)` of the page's new image, logged as they are.
    Bytes(usize, usize),
    /// The `len` bytes at `src` are copied to `dst` (a `memmove` within the
    /// page): a slot array shifted by an insert or a delete, logged in a
    /// few bytes instead of every shifted byte ([`diff_changes`]).
    Move {
        /// Where the bytes go.
        dst: usize,
        /// Where they are when the entry is applied.
        src: usize,
        /// How many (at most [`MAX_RANGE`]).
        len: usize,
    },
}

/// Append the record of one page's change as byte ranges (tests and the
/// fuzz targets; the engine diffs into [`Change`]s).
#[cfg(any(test, feature = "fuzzing"))]
pub fn encode_page_record(
    out: &mut Vec<u8>,
    space: u32,
    page_no: u32,
    zeroed: bool,
    after: &[u8],
    ranges: &[(usize, usize)],
) {
    let changes: Vec<Change> = ranges.iter().map(|&(s, e)| Change::Bytes(s, e)).collect();
    encode_page_changes(out, space, page_no, zeroed, after, &changes);
}

/// Append the record of one page's change: `space varint, page_no varint,
/// flags u8, n varint`, then `n` entries, each a tag varint `len << 1 |
/// move` and the zigzag varint of its offset's distance from where the
/// previous entry ended (0 for the first): a byte entry then its bytes
/// (ranges longer than [`MAX_RANGE`] are cut), a move the zigzag varint
/// of its source's distance from its destination. Empty byte ranges are
/// left out. Entries of a diff mostly follow each other up the page, so
/// the distances take a byte or two where the offsets took two.
///
/// # Panics
/// If the entries number more than 65535 (`diff_ranges` merges ranges
/// closer than 8 bytes, so a 64 KiB page has fewer than 6600), or a move
/// is empty or longer than [`MAX_RANGE`] ([`diff_changes`] makes neither).
pub fn encode_page_changes(
    out: &mut Vec<u8>,
    space: u32,
    page_no: u32,
    zeroed: bool,
    after: &[u8],
    changes: &[Change],
) {
    let mut n = 0usize;
    for c in changes {
        match *c {
            Change::Bytes(s, e) => n += (e.saturating_sub(s)).div_ceil(MAX_RANGE),
            Change::Move { len, .. } => {
                assert!((1..=MAX_RANGE).contains(&len), "a move of {len} bytes");
                n += 1;
            }
        }
    }
    assert!(
        n <= usize::from(u16::MAX),
        "{n} entries do not fit one page record"
    );
    put_varint(out, u64::from(space));
    put_varint(out, u64::from(page_no));
    out.push(if zeroed { PAGE_ZEROED } else { 0 });
    put_varint(out, n as u64);
    let mut prev = 0usize;
    for c in changes {
        match *c {
            Change::Bytes(s, e) => {
                let mut a = s;
                while a < e {
                    let b = (a + MAX_RANGE).min(e);
                    put_varint(out, ((b - a) as u64) << 1);
                    put_varint(out, zigzag(a as i64 - prev as i64));
                    out.extend_from_slice(&after[a..b]);
                    prev = b;
                    a = b;
                }
            }
            Change::Move { dst, src, len } => {
                put_varint(out, ((len as u64) << 1) | 1);
                put_varint(out, zigzag(dst as i64 - prev as i64));
                put_varint(out, zigzag(src as i64 - dst as i64));
                prev = dst + len;
            }
        }
    }
}

/// Most bytes an entry list takes in a record (its header not counted):
/// each entry's header at its largest, so that a range logged with a move
/// is chosen only where even then it is shorter than as bytes, and the
/// bound on a record (`engine::admission::page_record_max`) holds
/// whatever the distances between entries.
fn encoded_len(changes: &[Change]) -> usize {
    changes
        .iter()
        .map(|c| match *c {
            Change::Bytes(s, e) => {
                let len = e.saturating_sub(s);
                len + RANGE_HDR_MAX * len.div_ceil(MAX_RANGE)
            }
            Change::Move { .. } => MOVE_ENTRY_MAX,
        })
        .sum()
}

/// Shifts [`diff_changes`] looks for, in bytes: one to four 2-byte slots.
const SHIFTS: [usize; 4] = [2, 4, 6, 8];
/// Shortest changed range worth testing for a shift.
const MIN_SHIFTED: usize = 24;

/// The changes that turn `before` into `after`: [`diff_ranges`]' ranges,
/// where a range is mostly `before`'s bytes shifted by a few bytes (a B+tree
/// node's slot array after an insert or a delete: about a third of all redo
/// before moves) as a [`Change::Move`] and the few bytes around it.
///
/// Applied in order to `before`, the changes give `after` (but for the
/// checksum and page-LSN fields, as for ranges). Why a move reads the
/// bytes `before` had: a range's move reads only inside the range or, for
/// a shift left by `d ≤ 8`, up to `d` bytes past its end, and the next
/// range starts more than 8 bytes past it ([`diff_ranges`] merges closer
/// ones); the entries before it changed only bytes below the range; and
/// within a range the move is applied first. A move is used only where it
/// makes the range's entries shorter, so the record is never longer than
/// the same diff as byte ranges (admission's bound holds). Checked by the
/// property tests in `redo::format`.
pub fn diff_changes(before: &[u8], after: &[u8]) -> Vec<Change> {
    let mut out = Vec::new();
    diff_changes_at(before, after, 0, &mut out);
    out
}

/// [`diff_changes`] of a window of a page: `before` and `after` are the
/// page's bytes from offset `base` on, as they were and as they are, and
/// the changes (at page offsets) are appended to `out`.
///
/// A page guard that knows which bytes an mtr wrote (`buffer::guard`)
/// diffs only windows around them, and gets exactly the full page's diff
/// if every byte outside the windows is unchanged and each window reaches
/// at least [`DIFF_WINDOW_SLACK`] bytes past the last byte written in it
/// (or to the page's end), with windows closer than that merged: a
/// range's lookahead and the merge of two ranges look at most `GAP` bytes
/// past a changed byte, and a move's source at most the largest shift, so
/// neither can reach an unchanged stretch that the window left out. The
/// property tests in `redo::format` and `buffer::guard` check this.
pub fn diff_changes_at(before: &[u8], after: &[u8], base: usize, out: &mut Vec<Change>) {
    let mut ranges = Vec::new();
    diff_ranges_at(before, after, base, &mut ranges);
    out.reserve(ranges.len() + 2);
    for (s, e) in ranges {
        match shifted(before, after, base, s, e) {
            Some((c, k)) => out.extend_from_slice(&c[..k]),
            None => out.push(Change::Bytes(s, e)),
        }
    }
}

/// How far past the last byte written a window must reach for
/// [`diff_changes_at`] to find what the whole page's diff finds: the
/// ranges' merge gap and the largest shift.
pub const DIFF_WINDOW_SLACK: usize = 8;
const _: () =
    assert!(DIFF_WINDOW_SLACK >= DIFF_GAP && DIFF_WINDOW_SLACK >= SHIFTS[SHIFTS.len() - 1]);

/// Length of the common prefix of `a` and `b`, eight bytes at a time
/// (the byte-by-byte count was most of [`shifted`]'s time).
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_le_bytes(a[i..i + 8].try_into().unwrap_or([0; 8]));
        let y = u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        if x != y {
            // Little-endian: the lowest differing byte is the first.
            return i + ((x ^ y).trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + a[i..n]
        .iter()
        .zip(&b[i..n])
        .take_while(|(x, y)| x == y)
        .count()
}

/// The shorter encoding of the changed range `[s, e)` as a move and byte
/// entries, if one is shorter than the range's bytes: the entries, in the
/// first `k` places of the array.
/// `before` and `after` start at page offset `base`; `s`, `e` and the
/// entries are page offsets.
fn shifted(
    before: &[u8],
    after: &[u8],
    base: usize,
    s: usize,
    e: usize,
) -> Option<([Change; 3], usize)> {
    // Never near the checksum and LSN fields, which a diff leaves out.
    if e - s < MIN_SHIFTED || s < crate::page::PAGE_HEADER_SIZE || s < base {
        return None;
    }
    let (mut best, k) = shifted_local(before, after, s - base, e - base)?;
    for c in &mut best[..k] {
        *c = match *c {
            Change::Bytes(a, b) => Change::Bytes(a + base, b + base),
            Change::Move { dst, src, len } => Change::Move {
                dst: dst + base,
                src: src + base,
                len,
            },
        };
    }
    Some((best, k))
}

/// [`shifted`] with offsets into the slices.
fn shifted_local(before: &[u8], after: &[u8], s: usize, e: usize) -> Option<([Change; 3], usize)> {
    let n = before.len().min(after.len());
    if e > n {
        return None;
    }
    let none = Change::Bytes(0, 0);
    let mut best: Option<([Change; 3], usize)> = None;
    let mut best_len = encoded_len(&[Change::Bytes(s, e)]);
    let mut consider = |c: [Change; 3], k: usize| {
        let l = encoded_len(&c[..k]);
        if l < best_len {
            best_len = l;
            best = Some((c, k));
        }
    };
    for d in SHIFTS {
        // Right by d: after[s+d+i] == before[s+i].
        if s + d < e {
            let len = common_prefix(&after[s + d..e], &before[s..e - d]).min(MAX_RANGE);
            if len > 0 {
                let mv = Change::Move {
                    dst: s + d,
                    src: s,
                    len,
                };
                if s + d + len < e {
                    consider(
                        [mv, Change::Bytes(s, s + d), Change::Bytes(s + d + len, e)],
                        3,
                    );
                } else {
                    consider([mv, Change::Bytes(s, s + d), none], 2);
                }
            }
        }
        // Left by d: after[s+i] == before[s+d+i].
        if e + d <= n {
            let len = common_prefix(&after[s..e], &before[s + d..e + d]).min(MAX_RANGE);
            if len > 0 {
                let mv = Change::Move {
                    dst: s,
                    src: s + d,
                    len,
                };
                if s + len < e {
                    consider([mv, Change::Bytes(s + len, e), none], 2);
                } else {
                    consider([mv, none, none], 1);
                }
            }
        }
    }
    best
}

/// One entry of a page record as it lies in the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry<'a> {
    /// Write these bytes at this offset.
    Bytes(usize, &'a [u8]),
    /// Copy `len` bytes from `src` to `dst` within the page.
    Move {
        /// Destination offset.
        dst: usize,
        /// Source offset.
        src: usize,
        /// Bytes moved.
        len: usize,
    },
}

impl Entry<'_> {
    /// Apply the entry to a page image (every entry a decoder hands out
    /// lies inside the page size it was decoded for).
    fn apply(&self, page: &mut [u8]) {
        match *self {
            Entry::Bytes(off, bytes) => page[off..off + bytes.len()].copy_from_slice(bytes),
            Entry::Move { dst, src, len } => page.copy_within(src..src + len, dst),
        }
    }

    /// Append the entry as encoded after an entry that ended at `prev`
    /// (for re-encoding decoded records); returns where it ends.
    #[cfg(any(test, feature = "fuzzing"))]
    fn encode(&self, prev: usize, out: &mut Vec<u8>) -> usize {
        match *self {
            Entry::Bytes(off, bytes) => {
                put_varint(out, (bytes.len() as u64) << 1);
                put_varint(out, zigzag(off as i64 - prev as i64));
                out.extend_from_slice(bytes);
                off + bytes.len()
            }
            Entry::Move { dst, src, len } => {
                put_varint(out, ((len as u64) << 1) | 1);
                put_varint(out, zigzag(dst as i64 - prev as i64));
                put_varint(out, zigzag(src as i64 - dst as i64));
                dst + len
            }
        }
    }
}

/// A page record as it lies in the log: checked when split out of its
/// group ([`split_page_records`]), its entries read in place when applied
/// ([`apply_page_record_ref`]). Recovery keeps these, one per record, with
/// no allocation of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageRecordRef<'a> {
    /// Space id.
    pub space: u32,
    /// Page number.
    pub page_no: u32,
    /// Zero the page first.
    pub zeroed: bool,
    /// Number of entries in `body`.
    n: u16,
    /// `n` entries, each inside the page.
    body: &'a [u8],
}

/// Read one entry at `r` after an entry that ended at `prev`, checking
/// that it lies inside a `page_size`-byte page; the error names the page.
fn read_entry<'a>(
    r: &mut Reader<'a>,
    prev: usize,
    page_size: usize,
    page: (u32, u32),
) -> Result<Entry<'a>, String> {
    let (space, page_no) = page;
    let tag = r.varint(2 * MAX_RANGE as u64 + 1, "entry tag")?;
    let len = (tag >> 1) as usize;
    let at =
        |base: usize, d: u64| -> Option<usize> { usize::try_from(base as i64 + unzigzag(d)).ok() };
    let d = r.varint(MAX_DISTANCE, "entry offset")?;
    let outside = |what: &str, off: Option<usize>| {
        let at = off.map_or_else(|| "before byte 0".to_string(), |o| format!("at byte {o}"));
        format!(
            "{what} of {len} bytes {at} in page {space}:{page_no} outside a {page_size}-byte page"
        )
    };
    let Some(off) = at(prev, d).filter(|&o| len >= 1 && o + len <= page_size) else {
        return Err(outside(
            if tag & 1 == 1 { "move" } else { "range" },
            at(prev, d),
        ));
    };
    if tag & 1 == 1 {
        let d = r.varint(MAX_DISTANCE, "move source")?;
        let Some(src) = at(off, d).filter(|&s| s + len <= page_size) else {
            return Err(outside("move source", at(off, d)));
        };
        return Ok(Entry::Move { dst: off, src, len });
    }
    Ok(Entry::Bytes(off, r.take(len, "range bytes")?))
}

impl<'a> PageRecordRef<'a> {
    /// The entries to apply, in order.
    pub fn entries(&self) -> impl Iterator<Item = Entry<'a>> {
        let mut r = Reader::new(self.body);
        let mut prev = 0usize;
        // The body was checked against the page size when it was split
        // out; a page size of `usize::MAX / 2` here only skips checking it
        // again (and leaves no sum of an offset and a length to overflow).
        let page = (self.space, self.page_no);
        (0..self.n).map_while(move |_| {
            let e = read_entry(&mut r, prev, usize::MAX / 2, page).ok()?;
            prev = match e {
                Entry::Bytes(off, b) => off + b.len(),
                Entry::Move { dst, len, .. } => dst + len,
            };
            Some(e)
        })
    }
}

/// Split an MTR group payload into its page records, in order, handing
/// each to `f`. Every entry of a record handed out lies inside a
/// `page_size`-byte page, so [`apply_page_record_ref`] on such a page stays
/// in bounds; any malformation (truncation, unknown flags, an entry too
/// long or past the page end, a malformed varint) is an error saying
/// where, after the records before it were handed out.
pub fn split_page_records<'a>(
    p: &'a [u8],
    page_size: usize,
    mut f: impl FnMut(PageRecordRef<'a>),
) -> Result<(), String> {
    let mut r = Reader::new(p);
    while !r.is_empty() {
        let at = r.pos();
        let space = r.varint(u64::from(u32::MAX), "page record space")? as u32;
        let page_no = r.varint(u64::from(u32::MAX), "page record page number")? as u32;
        let flags = r.u8("page record flags")?;
        let n = r.varint(u64::from(u16::MAX), "page record entry count")? as u16;
        if flags & !PAGE_ZEROED != 0 {
            return Err(format!(
                "page record at byte {at} ({space}:{page_no}) has unknown flags {flags:#04x}"
            ));
        }
        let body_at = r.pos();
        let mut prev = 0usize;
        for _ in 0..n {
            prev = match read_entry(&mut r, prev, page_size, (space, page_no))? {
                Entry::Bytes(off, b) => off + b.len(),
                Entry::Move { dst, len, .. } => dst + len,
            };
        }
        f(PageRecordRef {
            space,
            page_no,
            zeroed: flags & PAGE_ZEROED != 0,
            n,
            body: &p[body_at..r.pos()],
        });
    }
    Ok(())
}

/// Apply a page record split out by [`split_page_records`] to a page image.
///
/// # Panics
/// If `page` is shorter than the page size the record was split for.
pub fn apply_page_record_ref(page: &mut [u8], r: &PageRecordRef<'_>) {
    if r.zeroed {
        page.fill(0);
    }
    for e in r.entries() {
        e.apply(page);
    }
}

/// A decoded page record (for tests and the fuzz targets: recovery uses
/// [`PageRecordRef`]).
#[cfg(any(test, feature = "fuzzing"))]
#[derive(Debug, PartialEq, Eq)]
pub struct PageRecord<'a> {
    /// Space id.
    pub space: u32,
    /// Page number.
    pub page_no: u32,
    /// Zero the page first.
    pub zeroed: bool,
    /// The record's flags as stored ([`PAGE_ZEROED`]).
    pub flags: u8,
    /// Its entries, in order.
    pub entries: Vec<Entry<'a>>,
}

#[cfg(any(test, feature = "fuzzing"))]
impl PageRecord<'_> {
    /// Encode the record again, entry for entry (`encode_page_changes`
    /// works from a page diff, which cannot reproduce arbitrary entries).
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_varint(out, u64::from(self.space));
        put_varint(out, u64::from(self.page_no));
        out.push(self.flags);
        put_varint(out, self.entries.len() as u64);
        let mut prev = 0;
        for e in &self.entries {
            prev = e.encode(prev, out);
        }
    }
}

/// Decode every page record of an MTR group payload. Every range of a
/// decoded record lies inside a `page_size`-byte page, so
/// [`apply_page_record`] on such a page stays in bounds; any malformation
/// (truncation, unknown flags, a range too long or past the page end) is an
/// error saying where. (The checks are [`split_page_records`]'.)
#[cfg(any(test, feature = "fuzzing"))]
pub fn decode_page_records(p: &[u8], page_size: usize) -> Result<Vec<PageRecord<'_>>, String> {
    // Never trust a count for an allocation larger than the bytes can hold.
    let mut out = Vec::with_capacity(p.len() / 4);
    split_page_records(p, page_size, |r| {
        out.push(PageRecord {
            space: r.space,
            page_no: r.page_no,
            zeroed: r.zeroed,
            flags: u8::from(r.zeroed) * PAGE_ZEROED,
            entries: r.entries().collect(),
        })
    })?;
    Ok(out)
}

/// Bytes [`diff_ranges`] skips at once while they are equal.
const DIFF_CHUNK: usize = 64;
/// Bytes [`diff_ranges`] compares at once before it goes by chunks: one
/// `memcmp` call per 64 bytes was 5 % of a single-threaded `read_write`
/// transaction's CPU, most of it the calls themselves.
const DIFF_BLOCK: usize = 1024;

/// Byte ranges where `after` differs from `before`, merging ranges closer
/// than a record header, ignoring the checksum and page-LSN fields (the LSN
/// is set from the group at replay).
///
/// Every mini-transaction commit diffs each page it changed, and most of a
/// page is unchanged: past the header, equal stretches are skipped
/// [`DIFF_BLOCK`] bytes at a time, then [`DIFF_CHUNK`] (slice comparisons,
/// vectorized `memcmp`) before the byte-by-byte scan; skipping only ever
/// passes equal bytes, so the ranges found are the same as the scan alone
/// would find.
pub fn diff_ranges(before: &[u8], after: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    diff_ranges_at(before, after, 0, &mut out);
    out
}

/// Ranges closer than this are merged: a range's header costs about as
/// much as the bytes between.
const DIFF_GAP: usize = 8;

/// [`diff_ranges`] of the window of a page that starts at offset `base`
/// (`before` and `after` are its bytes), appending page offsets to `out`
/// (and merging with its last range by the same rule).
pub fn diff_ranges_at(before: &[u8], after: &[u8], base: usize, out: &mut Vec<(usize, usize)>) {
    const GAP: usize = DIFF_GAP;
    // The fields a diff leaves out, in window offsets.
    let skip = |i: usize| {
        let p = i + base;
        (0..4).contains(&p) || (12..20).contains(&p)
    };
    // The XOR of eight bytes at `i` (little-endian: byte k is bits 8k..).
    let word = |i: usize| {
        let (Some(x), Some(y)) = (
            before.get(i..i + 8).and_then(|b| b.first_chunk::<8>()),
            after.get(i..i + 8).and_then(|b| b.first_chunk::<8>()),
        ) else {
            unreachable!("eight bytes at {i} of {}", before.len().min(after.len()));
        };
        u64::from_le_bytes(*x) ^ u64::from_le_bytes(*y)
    };
    let n = before.len().min(after.len());
    let mut i = 0;
    while i < n {
        if i + base >= 20 {
            while i + DIFF_BLOCK <= n && before[i..i + DIFF_BLOCK] == after[i..i + DIFF_BLOCK] {
                i += DIFF_BLOCK;
            }
            while i + DIFF_CHUNK <= n && before[i..i + DIFF_CHUNK] == after[i..i + DIFF_CHUNK] {
                i += DIFF_CHUNK;
            }
            // Then eight bytes at a time to the first that differs.
            while i + 8 <= n {
                let x = word(i);
                if x != 0 {
                    i += (x.trailing_zeros() / 8) as usize;
                    break;
                }
                i += 8;
            }
            if i >= n {
                break;
            }
        }
        if before[i] == after[i] || skip(i) {
            i += 1;
            continue;
        }
        let start = i;
        let mut end = i + 1;
        // Extend over every changed byte less than GAP past the end: to
        // the last changed one among the next GAP bytes, until there is
        // none (the same end as a byte-by-byte scan reaches).
        loop {
            if end + base >= 20 && end + GAP <= n {
                let x = word(end);
                if x == 0 {
                    break;
                }
                end += 8 - (x.leading_zeros() / 8) as usize;
                continue;
            }
            let lim = (end + GAP).min(n);
            match (end..lim)
                .rev()
                .find(|&j| before[j] != after[j] && !(12..20).contains(&(j + base)))
            {
                Some(j) => end = j + 1,
                None => break,
            }
        }
        let (start, end_abs) = (start + base, end + base);
        match out.last_mut() {
            Some(last) if start <= last.1 + GAP => last.1 = end_abs,
            _ => out.push((start, end_abs)),
        }
        i = end;
    }
}
const _: () = assert!(DIFF_GAP == 8, "diff_ranges_at reads the gap as one word");

/// Apply a decoded page record to a page image.
///
/// # Panics
/// If `page` is shorter than the page size the record was decoded for.
#[cfg(any(test, feature = "fuzzing"))]
pub fn apply_page_record(page: &mut [u8], r: &PageRecord<'_>) {
    if r.zeroed {
        page.fill(0);
    }
    for e in &r.entries {
        e.apply(page);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
