//! Entry points of the fuzz targets in `fuzz/` (feature `fuzzing`; also
//! compiled in tests, which run them on a few inputs so they never rot).
//! Each runs every decoder of one family on arbitrary bytes and panics only
//! on a finding: a decoder panicked, a decoded value does not encode back to
//! the bytes it came from, or a node that passed validation broke.
//!
//! Checksums stand in front of most fields, and a fuzzer cannot forge a
//! CRC, so each header is decoded twice: as given, and *resealed* (its CRC
//! recomputed) so that the field checks behind the CRC are reached too.

use crate::btree::node;
use crate::flush::doublewrite::{area_header_len, AreaHeader, FileHeader as DwFileHeader};
use crate::page::{
    compress, compute_checksum, get_u32, page_id, page_type, put_u32, stamp_checksum, verify_page,
    PageType,
};
use crate::redo::format::{
    apply_page_record, decode_group, decode_page_records, Checkpoint, LogFileHeader, PageRecord,
    CHECKPOINT_LEN,
};
use crate::space::header::FileHeader as DataFileHeader;
use crate::txn::record;

/// Page verification and B+tree node validation. Input: a selector byte
/// (bit 0: 8 KiB page instead of 4 KiB; bit 1: make the type agree with the
/// level), a script length byte, the `NodeMut` script, then the page image
/// (zero-padded to the page size).
pub fn page_and_node(data: &[u8]) {
    let _ = verify_page(data, page_id(data)).map_err(|e| e.to_string());
    let _ = compute_checksum(data);
    let [sel, script_len, rest @ ..] = data else {
        return;
    };
    let (script, image) = rest.split_at(usize::from(*script_len).min(rest.len()));
    let ps = if sel & 1 == 0 { 4096 } else { 8192 };
    let mut page = vec![0u8; ps];
    let n = image.len().min(ps);
    page[..n].copy_from_slice(&image[..n]);
    compressed_image(&page);
    if sel & 2 != 0 {
        let t = if page[38] == 0 {
            PageType::BtreeLeaf
        } else {
            PageType::BtreeInternal
        };
        crate::page::set_page_type(&mut page, t);
    }
    let _ = node::check(&page).map_err(|e| e.to_string());
    let is_node = matches!(
        page_type(&page),
        Some(PageType::BtreeLeaf | PageType::BtreeInternal)
    );
    if node::validate(&page).is_ok() && is_node {
        node::exercise(&page, script);
    }
    stamp_checksum(&mut page);
    let known = matches!(page_type(&page), Some(t) if t != PageType::Unused);
    assert_eq!(verify_page(&page, page_id(&page)).is_ok(), known);
}

/// A page slot decoded as a compressed image (`page::compress`), as given
/// and resealed: a failed decode leaves the bytes as read, and a decoded
/// page is exactly a page.
fn compressed_image(slot: &[u8]) {
    let mut resealed = slot.to_vec();
    if compress::is_compressed(slot) {
        let len = get_u32(slot, 24) as usize;
        let end = len.saturating_add(32).min(slot.len());
        put_u32(&mut resealed, 0, crc32c::crc32c(&slot[4..end]));
    }
    for bytes in [slot, &resealed[..]] {
        let mut buf = bytes.to_vec();
        match compress::decode(&mut buf) {
            Ok(()) => assert_eq!(buf.len(), bytes.len()),
            Err(_) => assert_eq!(buf, bytes),
        }
    }
}

/// Redo groups, page records and commit records. Input: a selector byte
/// (bit 0: 64 KiB pages instead of 4 KiB), then the bytes, decoded as a
/// group (at the LSN its bytes 8..16 name: a group stores no LSN, its
/// checksum covers it), as an MTR payload and as a commit record.
pub fn redo(data: &[u8]) {
    let [sel, b @ ..] = data else {
        return;
    };
    let ps = if sel & 1 == 0 { 4096 } else { 65536 };
    if let Some(lsn) = b.get(8..16).map(|s| crate::page::get_u64(s, 0)) {
        if let Some((h, payload)) = decode_group(b, lsn) {
            assert_eq!(h.len as usize, payload.len());
            page_records(payload, ps);
            commit_record(payload);
        }
    }
    page_records(b, ps);
    commit_record(b);
}

fn page_records(b: &[u8], ps: usize) {
    let Ok(recs) = decode_page_records(b, ps) else {
        return;
    };
    let mut page = vec![0u8; ps];
    for r in &recs {
        apply_page_record(&mut page, r);
    }
    assert_eq!(reencode(&recs), b, "page records do not encode back");
}

/// Page records written again range for range (`encode_page_record` works
/// from a page diff, which cannot reproduce arbitrary range splits).
fn reencode(recs: &[PageRecord<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in recs {
        r.encode(&mut out);
    }
    out
}

fn commit_record(b: &[u8]) {
    if let Ok(r) = record::decode(b) {
        assert_eq!(
            record::reencode(&r),
            b,
            "commit record does not encode back"
        );
    }
}

/// Every sealed header: data file, log file, checkpoint slot, doublewrite
/// file and area. Input: a selector byte (the area's slot count), then the
/// bytes, decoded as given and resealed.
pub fn headers(data: &[u8]) {
    let [sel, b @ ..] = data else {
        return;
    };
    let max_count = usize::from(*sel);
    let mut b = b.to_vec();
    headers_once(&b, max_count);
    for crc_at in [40, 36, 16, 48] {
        if b.len() >= crc_at + 4 {
            let mut c = b.clone();
            reseal(&mut c, crc_at);
            headers_once(&c, max_count);
        }
    }
    if let Some(count) = b.get(28..32).map(|s| get_u32(s, 0) as usize) {
        let len = area_header_len(count.min(b.len()));
        if count <= max_count && len <= b.len() {
            reseal(&mut b, len - 4);
            headers_once(&b, max_count);
        }
    }
}

fn reseal(b: &mut [u8], crc_at: usize) {
    let crc = crc32c::crc32c(&b[..crc_at]);
    put_u32(b, crc_at, crc);
}

/// Decode `b` as each header; whatever decodes must encode back to it.
fn headers_once(b: &[u8], max_count: usize) {
    if let Ok(h) = DataFileHeader::decode(b) {
        assert!(crate::page::is_page_size(h.page_size as usize) && h.file_index < h.n_files);
        let mut again = vec![0u8; 44];
        h.encode(&mut again);
        assert_eq!(again, b[..44], "data file header does not encode back");
    }
    if let Ok(h) = LogFileHeader::decode(b) {
        assert!(h.file_size > crate::redo::format::LOG_FILE_HDR && h.file_index < h.n_files);
        let mut again = vec![0u8; 40];
        h.encode(&mut again);
        assert_eq!(again, b[..40], "log file header does not encode back");
    }
    let stored = Checkpoint::stored(b);
    if let Ok(cp) = Checkpoint::open(b) {
        // A slot of the earlier 20-byte layout decodes as epoch 0 and is
        // written back in the current one.
        if cp.epoch_lsn != 0 || cp == stored {
            assert_eq!(cp, stored);
            let mut again = vec![0u8; CHECKPOINT_LEN];
            cp.encode(&mut again);
            assert_eq!(
                again,
                b[..CHECKPOINT_LEN],
                "checkpoint does not encode back"
            );
        }
    }
    if let Ok(h) = DwFileHeader::decode(b) {
        assert!(h.file_index < h.n_files && h.areas_in_file <= h.n_areas);
        let mut again = b[..52].to_vec();
        h.encode(&mut again);
        // Bytes 36..40 are reserved: not decoded, written as zero.
        again[36..40].copy_from_slice(&b[36..40]);
        reseal(&mut again, 48);
        assert_eq!(
            again,
            b[..52],
            "doublewrite file header does not encode back"
        );
    }
    if let Ok(Some(h)) = AreaHeader::decode(b, max_count) {
        assert!(h.entries.len() <= max_count);
        let mut again = b.to_vec();
        h.encode(&mut again);
        assert_eq!(again, b, "area header does not encode back");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The targets run on a few inputs in every test run, valid ones
    /// included, so the fuzz entry points cannot rot.
    #[test]
    fn fuzz_entry_points_accept_valid_and_random_inputs() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut bytes = |n: usize| -> Vec<u8> {
            (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect()
        };
        for n in [0, 1, 2, 20, 60, 300, 5000] {
            let b = bytes(n);
            page_and_node(&b);
            redo(&b);
            headers(&b);
        }
        let mut leaf = vec![2u8, 9, 0, 1, 30, 0, 2, 40, 1, 0, 0];
        let mut page = vec![0u8; 4096];
        crate::page::init_page(
            &mut page,
            crate::page::PageId::new(0, 4),
            PageType::BtreeLeaf,
        );
        let mut n = node::NodeMut::init(&mut page, 0, 0);
        assert!(n.insert_cell(0, &node::leaf_cell(b"key", b"value")));
        leaf.extend_from_slice(&page);
        page_and_node(&leaf);
        // An 8 KiB page stored compressed: selector 1, no script.
        let mut big = vec![0u8; 8192];
        crate::page::init_page(
            &mut big,
            crate::page::PageId::new(0, 5),
            PageType::BtreeLeaf,
        );
        big[64..4096].copy_from_slice(&bytes(4032));
        stamp_checksum(&mut big);
        let mut stored = vec![0u8; 8192];
        assert!(compress::encode(&big, &mut stored).is_none(), "noise");
        big[64..4096].fill(7);
        stamp_checksum(&mut big);
        assert_eq!(compress::encode(&big, &mut stored), Some(4096));
        let mut input = vec![1u8, 0];
        input.extend_from_slice(&stored);
        page_and_node(&input);

        let mut h = vec![8u8; 1];
        let mut block = vec![0u8; 64];
        LogFileHeader {
            version: crate::redo::format::LOG_VERSION,
            file_index: 0,
            n_files: 2,
            file_size: 1 << 20,
            creation_id: 5,
        }
        .encode(&mut block);
        h.extend_from_slice(&block);
        headers(&h);
        let mut g = vec![0u8];
        crate::redo::format::encode_group(1, 0, 1, &record::encode(3, &[]), &mut g);
        redo(&g);
    }
}
