//! Redo log on-disk encoding: file header, checkpoint slots, record groups
//! and page-change records. See docs/format.md, "Redo log".

use crate::page::Lsn;
use crate::page::{get_u16, get_u32, get_u64, put_u16, put_u32, put_u64};

/// Magic at the start of every redo log file.
pub const LOG_MAGIC: &[u8; 8] = b"KEELREDO";
/// Redo format version.
pub const LOG_VERSION: u32 = 1;
/// Bytes reserved at the start of every log file: file header block and
/// two checkpoint slot blocks (used in file 0 only).
pub const LOG_FILE_HDR: u64 = 3 * 4096;
/// Offsets of the two checkpoint slots in file 0.
pub const CHECKPOINT_SLOTS: [u64; 2] = [4096, 8192];
/// Bytes of a record-group header.
pub const GROUP_HDR: usize = 20;

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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogFileHeader {
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
    /// Encode into `b` (≥ 40 bytes).
    pub fn encode(&self, b: &mut [u8]) {
        b[..40].fill(0);
        b[0..8].copy_from_slice(LOG_MAGIC);
        put_u32(b, 8, LOG_VERSION);
        put_u32(b, 12, self.file_index);
        put_u32(b, 16, self.n_files);
        put_u64(b, 20, self.file_size);
        put_u64(b, 28, self.creation_id);
        let c = crc32c::crc32c(&b[..36]);
        put_u32(b, 36, c);
    }

    /// Decode and check; the error says what is wrong.
    pub fn decode(b: &[u8]) -> Result<LogFileHeader, String> {
        if b.len() < 40 || &b[0..8] != LOG_MAGIC {
            return Err("not a Keel redo log file (bad magic)".into());
        }
        if get_u32(b, 36) != crc32c::crc32c(&b[..36]) {
            return Err("log file header checksum mismatch".into());
        }
        let v = get_u32(b, 8);
        if v != LOG_VERSION {
            return Err(format!(
                "redo format version {v}, this build reads {LOG_VERSION}"
            ));
        }
        Ok(LogFileHeader {
            file_index: get_u32(b, 12),
            n_files: get_u32(b, 16),
            file_size: get_u64(b, 20),
            creation_id: get_u64(b, 28),
        })
    }
}

/// One checkpoint slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// Monotonic checkpoint number; the valid slot with the larger one wins.
    pub no: u64,
    /// Recovery starts reading the log here.
    pub lsn: Lsn,
}

impl Checkpoint {
    /// Encode into `b` (≥ 20 bytes).
    pub fn encode(&self, b: &mut [u8]) {
        b[..20].fill(0);
        put_u64(b, 0, self.no);
        put_u64(b, 8, self.lsn);
        let c = crc32c::crc32c(&b[..16]);
        put_u32(b, 16, c);
    }

    /// Decode; None when the slot is empty or its checksum fails.
    pub fn decode(b: &[u8]) -> Option<Checkpoint> {
        if b.len() < 20 || get_u32(b, 16) != crc32c::crc32c(&b[..16]) || get_u64(b, 0) == 0 {
            return None;
        }
        Some(Checkpoint {
            no: get_u64(b, 0),
            lsn: get_u64(b, 8),
        })
    }
}

/// Header of a record group: `len u32, kind u8, 3 reserved, lsn u64, crc u32`
/// where the CRC32C covers the first 16 header bytes and the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupHeader {
    /// Payload length.
    pub len: u32,
    /// Group kind ([`kind`]).
    pub kind: u8,
    /// LSN of the group's first byte.
    pub lsn: Lsn,
}

/// Encode a whole group (header + payload) starting at `lsn`.
pub fn encode_group(kind: u8, lsn: Lsn, payload: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + GROUP_HDR, 0);
    let h = &mut out[start..];
    put_u32(h, 0, payload.len() as u32);
    h[4] = kind;
    put_u64(h, 8, lsn);
    let mut crc = crc32c::crc32c(&h[..16]);
    crc = crc32c::crc32c_append(crc, payload);
    put_u32(&mut out[start..], 16, crc);
    out.extend_from_slice(payload);
}

/// Decode the group at the start of `b`, expected to begin at `lsn`.
/// None when it is not a complete, valid group written at that LSN (the
/// end of the log: garbage from an earlier lap, or a torn tail).
pub fn decode_group(b: &[u8], lsn: Lsn) -> Option<(GroupHeader, &[u8])> {
    if b.len() < GROUP_HDR {
        return None;
    }
    let len = get_u32(b, 0) as usize;
    if get_u64(b, 8) != lsn || b.len() < GROUP_HDR + len {
        return None;
    }
    let payload = &b[GROUP_HDR..GROUP_HDR + len];
    let crc = crc32c::crc32c_append(crc32c::crc32c(&b[..16]), payload);
    if crc != get_u32(b, 16) {
        return None;
    }
    Some((
        GroupHeader {
            len: len as u32,
            kind: b[4],
            lsn,
        },
        payload,
    ))
}

/// Flag of a page record: zero the page before applying its ranges.
pub const PAGE_ZEROED: u8 = 1;
/// Longest byte range in one page record entry.
pub(crate) const MAX_RANGE: usize = 32 * 1024;

/// Append the record of one page's change: `space u32, page_no u32,
/// flags u8, n_ranges u16, n × (offset u16, len u16, bytes)`.
pub fn encode_page_record(
    out: &mut Vec<u8>,
    space: u32,
    page_no: u32,
    zeroed: bool,
    after: &[u8],
    ranges: &[(usize, usize)],
) {
    let mut split = Vec::with_capacity(ranges.len());
    for &(s, e) in ranges {
        let mut a = s;
        while a < e {
            let b = (a + MAX_RANGE).min(e);
            split.push((a, b));
            a = b;
        }
    }
    let mut h = [0u8; 11];
    put_u32(&mut h, 0, space);
    put_u32(&mut h, 4, page_no);
    h[8] = if zeroed { PAGE_ZEROED } else { 0 };
    put_u16(&mut h, 9, split.len() as u16);
    out.extend_from_slice(&h);
    for (s, e) in split {
        let mut r = [0u8; 4];
        // An offset of 65536 cannot occur: ranges end at most at page_size.
        put_u16(&mut r, 0, s as u16);
        put_u16(&mut r, 2, (e - s) as u16);
        out.extend_from_slice(&r);
        out.extend_from_slice(&after[s..e]);
    }
}

/// A decoded page record.
#[derive(Debug, PartialEq, Eq)]
pub struct PageRecord<'a> {
    /// Space id.
    pub space: u32,
    /// Page number.
    pub page_no: u32,
    /// Zero the page first.
    pub zeroed: bool,
    /// (offset, bytes) to write.
    pub ranges: Vec<(usize, &'a [u8])>,
}

/// Decode every page record of an MTR group payload.
pub fn decode_page_records(mut p: &[u8], page_size: usize) -> Result<Vec<PageRecord<'_>>, String> {
    let mut out = Vec::new();
    while !p.is_empty() {
        if p.len() < 11 {
            return Err("truncated page record header".into());
        }
        let (space, page_no, flags, n) = (get_u32(p, 0), get_u32(p, 4), p[8], get_u16(p, 9));
        p = &p[11..];
        let mut ranges = Vec::with_capacity(n as usize);
        for _ in 0..n {
            if p.len() < 4 {
                return Err("truncated range header".into());
            }
            let (off, len) = (get_u16(p, 0) as usize, get_u16(p, 2) as usize);
            if off + len > page_size || p.len() < 4 + len {
                return Err(format!("range {off}+{len} outside a {page_size}-byte page"));
            }
            ranges.push((off, &p[4..4 + len]));
            p = &p[4 + len..];
        }
        out.push(PageRecord {
            space,
            page_no,
            zeroed: flags & PAGE_ZEROED != 0,
            ranges,
        });
    }
    Ok(out)
}

/// Byte ranges where `after` differs from `before`, merging ranges closer
/// than a record header, ignoring the checksum and page-LSN fields (the LSN
/// is set from the group at replay).
pub fn diff_ranges(before: &[u8], after: &[u8]) -> Vec<(usize, usize)> {
    const GAP: usize = 8;
    let mut out: Vec<(usize, usize)> = Vec::new();
    let n = before.len().min(after.len());
    let mut i = 0;
    while i < n {
        if before[i] == after[i] || (0..4).contains(&i) || (12..20).contains(&i) {
            i += 1;
            continue;
        }
        let start = i;
        let mut end = i + 1;
        let mut j = end;
        while j < n && j < end + GAP {
            if before[j] != after[j] && !(12..20).contains(&j) {
                end = j + 1;
            }
            j += 1;
        }
        match out.last_mut() {
            Some(last) if start <= last.1 + GAP => last.1 = end,
            _ => out.push((start, end)),
        }
        i = end;
    }
    out
}

/// Apply a decoded page record to a page image.
pub fn apply_page_record(page: &mut [u8], r: &PageRecord<'_>) {
    if r.zeroed {
        page.fill(0);
    }
    for &(off, bytes) in &r.ranges {
        page[off..off + bytes.len()].copy_from_slice(bytes);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_reject_corruption() {
        let h = LogFileHeader {
            file_index: 1,
            n_files: 2,
            file_size: 1 << 20,
            creation_id: 99,
        };
        let mut b = vec![0u8; 64];
        h.encode(&mut b);
        assert_eq!(LogFileHeader::decode(&b).unwrap(), h);
        for i in 0..40 {
            let mut c = b.clone();
            c[i] ^= 4;
            assert!(LogFileHeader::decode(&c).is_err(), "byte {i}");
        }
        let cp = Checkpoint {
            no: 7,
            lsn: 123_456,
        };
        cp.encode(&mut b);
        assert_eq!(Checkpoint::decode(&b), Some(cp));
        b[9] ^= 1;
        assert_eq!(Checkpoint::decode(&b), None);
    }

    #[test]
    fn groups_round_trip_and_stop_at_garbage() {
        let mut out = Vec::new();
        encode_group(kind::MTR, 1000, b"hello", &mut out);
        encode_group(kind::TXN_COMMIT, 1000 + 25, b"world!", &mut out);
        let (g, p) = decode_group(&out, 1000).unwrap();
        assert_eq!((g.kind, p), (kind::MTR, &b"hello"[..]));
        let (g2, p2) = decode_group(&out[25..], 1025).unwrap();
        assert_eq!((g2.kind, p2), (kind::TXN_COMMIT, &b"world!"[..]));
        // Wrong expected LSN (an earlier lap), torn payload, short buffer.
        assert!(decode_group(&out, 1000 + (1 << 20)).is_none());
        let mut torn = out.clone();
        torn[22] ^= 1;
        assert!(decode_group(&torn, 1000).is_none());
        assert!(decode_group(&out[..24], 1000).is_none());
    }

    #[test]
    fn diff_and_apply_reproduce_the_page() {
        let before = vec![0u8; 4096];
        let mut after = before.clone();
        after[100..110].fill(7);
        after[115] = 1;
        after[4000..4096].fill(9);
        after[14] = 5; // page LSN bytes are ignored
        let ranges = diff_ranges(&before, &after);
        assert_eq!(ranges, vec![(100, 116), (4000, 4096)]);
        let mut rec = Vec::new();
        encode_page_record(&mut rec, 0, 42, false, &after, &ranges);
        let recs = decode_page_records(&rec, 4096).unwrap();
        assert_eq!(recs.len(), 1);
        let mut replay = before.clone();
        apply_page_record(&mut replay, &recs[0]);
        after[14] = 0;
        assert_eq!(replay, after);
        assert!(decode_page_records(&rec[..rec.len() - 1], 4096).is_err());
    }

    #[test]
    fn full_64k_page_splits_into_ranges() {
        let before = vec![0u8; 65536];
        let after = vec![1u8; 65536];
        let ranges = diff_ranges(&before, &after);
        let mut rec = Vec::new();
        encode_page_record(&mut rec, 0, 1, true, &after, &ranges);
        let recs = decode_page_records(&rec, 65536).unwrap();
        let mut replay = vec![5u8; 65536];
        apply_page_record(&mut replay, &recs[0]);
        assert_eq!(&replay[20..], &after[20..]);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod diff_props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn diff_apply_reproduces_every_byte_but_checksum_and_lsn(
            before in proptest::collection::vec(any::<u8>(), 4096),
            edits in proptest::collection::vec((0usize..4096, 1usize..64, any::<u8>()), 0..20),
        ) {
            let mut after = before.clone();
            for (off, len, v) in edits {
                let end = (off + len).min(4096);
                after[off..end].fill(v);
            }
            let ranges = diff_ranges(&before, &after);
            let mut rec = Vec::new();
            encode_page_record(&mut rec, 0, 1, false, &after, &ranges);
            let recs = decode_page_records(&rec, 4096).unwrap();
            let mut replay = before.clone();
            apply_page_record(&mut replay, &recs[0]);
            for i in 0..4096 {
                if !(0..4).contains(&i) && !(12..20).contains(&i) {
                    prop_assert_eq!(replay[i], after[i], "byte {}", i);
                }
            }
        }
    }
}
