//! Redo encoding: round trips, corruption, and decoders that never panic
//! on any bytes, including resealed mutations that pass the checksum.

use super::*;
use crate::page::coding::{put_varint, zigzag};
use proptest::prelude::*;

#[test]
fn headers_round_trip_and_reject_corruption() {
    let h = LogFileHeader {
        version: LOG_VERSION,
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
        epoch: 9,
        epoch_lsn: 200_000,
    };
    cp.encode(&mut b);
    assert_eq!(Checkpoint::decode(&b), Some(cp));
    b[9] ^= 1;
    assert_eq!(Checkpoint::decode(&b), None);
}

#[test]
fn groups_round_trip_and_stop_at_garbage() {
    let mut out = Vec::new();
    encode_group(kind::MTR, 1000, 7, b"hello", &mut out);
    encode_group(
        kind::TXN_COMMIT,
        1000 + 21,
        0x0123_4567,
        b"world!",
        &mut out,
    );
    assert_eq!(out.len(), 2 * GROUP_HDR + 11);
    let (g, p) = decode_group(&out, 1000).unwrap();
    assert_eq!((g.kind, g.epoch, p), (kind::MTR, 7, &b"hello"[..]));
    let (g2, p2) = decode_group(&out[21..], 1021).unwrap();
    // The header keeps the epoch's low 24 bits.
    assert_eq!(
        (g2.kind, g2.epoch, p2),
        (kind::TXN_COMMIT, 0x23_4567, &b"world!"[..])
    );
    // Wrong expected LSN (an earlier lap; one 4 GiB earlier has the same
    // low bits, and the checksum covers the whole LSN), torn payload,
    // short buffer.
    assert!(decode_group(&out, 1000 + (1 << 20)).is_none());
    assert!(decode_group(&out, 1001).is_none());
    assert!(group_at(&out, 1000 + (1 << 32)));
    assert!(decode_group(&out, 1000 + (1 << 32)).is_none());
    let mut torn = out.clone();
    torn[18] ^= 1;
    assert!(decode_group(&torn, 1000).is_none());
    assert!(decode_group(&out[..20], 1000).is_none());
    // A group of version 1 is not one of version 2, nor the reverse.
    let mut v1 = Vec::new();
    encode_group_v1(kind::MTR, 1000, 7, b"hello", &mut v1);
    assert_eq!(v1.len(), GROUP_HDR_V1 + 5);
    assert_eq!(
        decode_group_v1(&v1, 1000).map(|(h, p)| (h.kind, p)),
        Some((kind::MTR, &b"hello"[..]))
    );
    assert!(decode_group_v1(&v1, 1001).is_none());
    assert!(decode_group(&v1, 1000).is_none());
    assert!(decode_group_v1(&out, 1000).is_none());
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

fn log_header() -> LogFileHeader {
    LogFileHeader {
        version: LOG_VERSION,
        file_index: 1,
        n_files: 2,
        file_size: 1 << 20,
        creation_id: 99,
    }
}

/// Recompute a sealed header's CRC after a mutation, so that only the
/// field checks stand between the bytes and a decoded header.
fn reseal(b: &mut [u8], crc_at: usize) {
    let crc = crc32c::crc32c(&b[..crc_at]);
    put_u32(b, crc_at, crc);
}

#[test]
fn log_header_bytes_are_the_documented_table() {
    let mut b = vec![0xeeu8; 48];
    log_header().encode(&mut b);
    assert_eq!(&b[..8], b"KEELREDO");
    assert_eq!(
        (get_u32(&b, 8), get_u32(&b, 12), get_u32(&b, 16)),
        (LOG_VERSION, 1, 2)
    );
    assert_eq!((get_u64(&b, 20), get_u64(&b, 28)), (1 << 20, 99));
    assert_eq!(get_u32(&b, 36), crc32c::crc32c(&b[..36]));
    assert_eq!(&b[40..], &[0xee; 8]);
    let mut c = vec![0xeeu8; 36];
    Checkpoint {
        no: 3,
        lsn: 9000,
        epoch: 5,
        epoch_lsn: 8500,
    }
    .encode(&mut c);
    assert_eq!((get_u64(&c, 0), get_u64(&c, 8)), (3, 9000));
    assert_eq!((get_u64(&c, 16), get_u32(&c, 24)), (8500, 5));
    assert_eq!(get_u32(&c, 28), crc32c::crc32c(&c[..28]));
    assert_eq!(&c[32..], &[0xee; 4]);
    let mut g = Vec::new();
    encode_group(kind::MTR, 9000, 0x0102_0304, b"x", &mut g);
    assert_eq!(
        (get_u32(&g, 0), g[4], &g[5..8]),
        (1, kind::MTR, &[4u8, 3, 2][..])
    );
    assert_eq!(get_u32(&g, 8), 9000);
    let mut covered = 9000u64.to_le_bytes().to_vec();
    covered.extend_from_slice(&g[..12]);
    covered.push(b'x');
    assert_eq!(get_u32(&g, 12), crc32c::crc32c(&covered));
    assert_eq!(&g[16..], b"x");
}

#[test]
fn a_checkpoint_slot_of_the_earlier_layout_reads_as_epoch_0() {
    // `no u64, lsn u64, crc u32`, as logs before epochs were written.
    let mut b = [0u8; 4096];
    put_u64(&mut b, 0, 4);
    put_u64(&mut b, 8, 10_000);
    let crc = crc32c::crc32c(&b[..16]);
    put_u32(&mut b, 16, crc);
    let cp = Checkpoint::open(&b).unwrap();
    assert_eq!(
        cp,
        Checkpoint {
            no: 4,
            lsn: 10_000,
            epoch: 0,
            epoch_lsn: 0
        }
    );
    // Its groups carry epoch 0 (the bytes were reserved, zero) and are
    // history wherever they lie; a group with an epoch is not.
    assert!(cp.admits(10_000, 0) && cp.admits(99_999, 0));
    assert!(!cp.admits(10_000, 1));
}

#[test]
fn groups_of_an_earlier_epoch_past_the_epoch_start_are_not_history() {
    let cp = Checkpoint {
        no: 9,
        lsn: 10_000,
        epoch: 0x0100_0005,
        epoch_lsn: 20_000,
    };
    // Before the run began: written by earlier runs, replayed by it.
    assert!(cp.admits(10_000, 3) && cp.admits(19_999, 4));
    // From its start on: its own epoch (stored as 24 bits) only.
    assert!(cp.admits(20_000, 5) && cp.admits(50_000, 5));
    assert!(!cp.admits(20_000, 4));
    assert!(!cp.admits(50_000, 0x0100_0005));
}

#[test]
fn impossible_log_geometry_is_rejected_despite_a_good_checksum() {
    type Spoil = fn(&mut LogFileHeader);
    let cases: [(Spoil, &str); 7] = [
        // Each of these made `Log::new` underflow or divide by zero.
        (|h| h.file_size = 0, "log file size 0 "),
        (|h| h.file_size = LOG_FILE_HDR, "log file size 12288 "),
        (|h| h.file_size = (1 << 20) + 1, "not a multiple"),
        (|h| h.n_files = 0, "0 log files"),
        (|h| h.n_files = 101, "101 log files"),
        (|h| h.file_index = 2, "file index 2 of only 2"),
        (|h| h.file_size = u64::MAX - 4095, "overflow"),
    ];
    for (spoil, msg) in cases {
        let mut h = log_header();
        spoil(&mut h);
        let mut b = vec![0u8; 64];
        h.encode(&mut b);
        let e = LogFileHeader::decode(&b).unwrap_err();
        assert!(e.contains(msg), "{e} lacks {msg:?}");
    }
}

#[test]
fn checkpoint_slots_say_why_they_are_invalid() {
    let cp = |no, lsn| Checkpoint {
        no,
        lsn,
        epoch: 2,
        epoch_lsn: lsn,
    };
    let open = |cp: Checkpoint| {
        let mut b = [0u8; CHECKPOINT_LEN];
        cp.encode(&mut b);
        Checkpoint::open(&b)
    };
    assert!(open(cp(0, 9000)).unwrap_err().contains("number 0"));
    assert!(open(cp(1, 8191)).unwrap_err().contains("before"));
    assert_eq!(open(cp(1, 8192)), Ok(cp(1, 8192)));
    assert!(Checkpoint::open(&[0u8; 20]).unwrap_err().contains("empty"));
    assert!(Checkpoint::open(&[1u8; 19])
        .unwrap_err()
        .contains("19 bytes"));
    assert_eq!(
        Checkpoint::stored(&[1u8; 12]),
        Checkpoint {
            no: 0x0101_0101_0101_0101,
            lsn: 0,
            epoch: 0,
            epoch_lsn: 0,
        }
    );
}

#[test]
fn page_records_reject_unknown_flags_long_ranges_and_huge_counts() {
    let page = vec![7u8; 4096];
    let mut rec = Vec::new();
    encode_page_record(&mut rec, 0, 5, false, &page, &[(100, 200)]);
    // space 0, page 5, flags, 1 entry; tag 200 (2 bytes), distance 200
    // (2 bytes: zigzag of 100), the 100 bytes.
    assert_eq!(&rec[..8], &[0, 5, 0, 1, 0xc8, 0x01, 0xc8, 0x01]);
    assert_eq!(rec.len(), 108);
    let mut flags = rec.clone();
    flags[2] = 0x82;
    assert!(decode_page_records(&flags, 4096)
        .unwrap_err()
        .contains("unknown flags"));
    // A count of 65535 entries over a 1-byte tail: an error, and no huge allocation.
    let mut count = rec[..3].to_vec();
    put_varint(&mut count, u64::from(u16::MAX));
    count.push(2);
    assert!(decode_page_records(&count, 4096)
        .unwrap_err()
        .contains("truncated entry offset"));
    let mut over = rec[..3].to_vec();
    put_varint(&mut over, 1 << 16);
    assert!(decode_page_records(&over, 4096)
        .unwrap_err()
        .contains("entry count"));
    // A tag longer than the longest range.
    let mut long = rec[..4].to_vec();
    put_varint(&mut long, 2 * 40000);
    long.push(0);
    long.extend_from_slice(&[1; 40000]);
    assert!(decode_page_records(&long, 65536)
        .unwrap_err()
        .contains("is over"));
    // An empty range is not an entry.
    let mut empty = rec[..4].to_vec();
    empty.extend_from_slice(&[0, 0]);
    assert!(decode_page_records(&empty, 4096)
        .unwrap_err()
        .contains("outside"));
    assert!(decode_page_records(&rec, 150)
        .unwrap_err()
        .contains("outside a 150-byte page"));
}

/// A node-like page: a slot array of `n` 2-byte slots from byte 44, and
/// noise around it.
fn slotted(n: usize, seed: u8) -> Vec<u8> {
    let mut p: Vec<u8> = (0..4096)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect();
    for i in 0..n {
        p[44 + 2 * i..46 + 2 * i].copy_from_slice(&((1000 + 7 * i) as u16).to_le_bytes());
    }
    p
}

/// Replay `changes` of `before → after` through the log encoding.
fn replay(before: &[u8], after: &[u8], changes: &[Change]) -> Vec<u8> {
    let mut rec = Vec::new();
    encode_page_changes(&mut rec, 0, 1, false, after, changes);
    let recs = decode_page_records(&rec, before.len()).unwrap();
    assert_eq!(recs.len(), 1);
    assert_eq!(reencode(&recs), rec, "a record with moves encodes back");
    let mut page = before.to_vec();
    apply_page_record(&mut page, &recs[0]);
    page
}

#[test]
fn a_slot_inserted_or_deleted_mid_array_is_logged_as_a_move() {
    let before = slotted(400, 3);
    // Insert at slot 10: the 390 slots after it shift right by 2.
    let mut ins = before.clone();
    ins.copy_within(44 + 20..44 + 800, 44 + 22);
    ins[64..66].copy_from_slice(&9999u16.to_le_bytes());
    let c = diff_changes(&before, &ins);
    assert!(c.iter().any(|c| matches!(c, Change::Move { .. })), "{c:?}");
    assert!(encoded_len(&c) < 40, "{c:?}: {} bytes", encoded_len(&c));
    assert_eq!(replay(&before, &ins, &c), ins);
    // Delete slot 10: the slots after it shift left by 2, the last one stays.
    let mut del = before.clone();
    del.copy_within(44 + 22..44 + 800, 44 + 20);
    let c = diff_changes(&before, &del);
    assert!(c.iter().any(|c| matches!(c, Change::Move { .. })), "{c:?}");
    assert!(encoded_len(&c) < 40, "{c:?}: {} bytes", encoded_len(&c));
    assert_eq!(replay(&before, &del, &c), del);
    // A short range, or one in the page header, stays bytes.
    let mut small = before.clone();
    small[100..110].fill(0xee);
    small[20..30].copy_from_slice(&before[22..32]);
    assert!(diff_changes(&before, &small)
        .iter()
        .all(|c| matches!(c, Change::Bytes(..))));
}

#[test]
fn moves_are_refused_outside_the_page_and_past_the_longest_range() {
    let before = slotted(400, 1);
    let mut after = before.clone();
    after.copy_within(44..800, 46);
    let mut rec = Vec::new();
    encode_page_changes(
        &mut rec,
        0,
        1,
        false,
        &after,
        &diff_changes(&before, &after),
    );
    let recs = decode_page_records(&rec, 4096).unwrap();
    let Entry::Move { dst, src, len } = recs[0].entries[0] else {
        panic!("{:?}", recs[0].entries);
    };
    assert_eq!(dst, src + 2);
    // The move is the first entry: tag `len << 1 | 1`, distance of `dst`
    // from 0, of the source from the destination (-2).
    let mut head = vec![0, 1, 0, recs[0].entries.len() as u8];
    put_varint(&mut head, ((len as u64) << 1) | 1);
    put_varint(&mut head, zigzag(dst as i64));
    put_varint(&mut head, zigzag(-2));
    assert_eq!(&rec[..head.len()], &head[..]);
    let far = |src: usize, len: usize| {
        let r = PageRecord {
            space: 0,
            page_no: 1,
            zeroed: false,
            flags: 0,
            entries: vec![Entry::Move { dst, src, len }],
        };
        let mut out = Vec::new();
        r.encode(&mut out);
        decode_page_records(&out, 4096).map(|_| ())
    };
    assert!(far(src, len).is_ok());
    assert!(far(4000, len)
        .unwrap_err()
        .contains("outside a 4096-byte page"));
    assert!(far(src, 40000).unwrap_err().contains("is over"));
    assert!(far(src, 0).unwrap_err().contains("outside"));
}

/// Encode decoded page records again, range for range.
fn reencode(recs: &[PageRecord<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in recs {
        r.encode(&mut out);
    }
    out
}

/// Several page records of a 4 KiB page, as one MTR payload.
fn mtr_payload(edits: &[(usize, usize, u8)]) -> Vec<u8> {
    let before = vec![0u8; 4096];
    let mut out = Vec::new();
    for (i, &(off, len, v)) in edits.iter().enumerate() {
        let mut after = before.clone();
        after[off..(off + len).min(4096)].fill(v | 1);
        let ranges = diff_ranges(&before, &after);
        encode_page_record(&mut out, 0, i as u32, i % 2 == 0, &after, &ranges);
    }
    out
}

/// `diff_ranges` as it was, one byte at a time: the chunked scan must
/// find exactly the same ranges.
fn diff_ranges_bytewise(before: &[u8], after: &[u8]) -> Vec<(usize, usize)> {
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

proptest! {
        /// The word-wise common prefix is the byte-wise one, wherever the
        /// first difference falls (inside a word, at its edge, past the
        /// shorter slice).
        #[test]
        fn common_prefix_is_the_bytewise_count(
            a in proptest::collection::vec(0u8..3, 0..70),
            b in proptest::collection::vec(0u8..3, 0..70),
        ) {
            let naive = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
            prop_assert_eq!(super::common_prefix(&a, &b), naive);
            let mut same = a.clone();
            same.truncate(b.len().min(a.len()));
            prop_assert_eq!(super::common_prefix(&a, &same), same.len());
        }

        #[test]
        fn chunked_diff_finds_the_same_ranges_as_the_bytewise_scan(
            before in proptest::collection::vec(any::<u8>(), 0..4200),
            edits in proptest::collection::vec((0usize..4200, 1usize..80, any::<u8>()), 0..24),
            after_len_cut in 0usize..3,
        ) {
            let mut after = before.clone();
            for (off, len, v) in edits {
                let off = off.min(after.len());
                let end = (off + len).min(after.len());
                after[off..end].fill(v);
            }
            // Also pages of different lengths (the shorter one bounds).
            after.truncate(after.len().saturating_sub(after_len_cut * 37));
            prop_assert_eq!(diff_ranges(&before, &after), diff_ranges_bytewise(&before, &after));
        }

        /// Slot arrays shifted by inserts and deletes (several per page,
        /// of 1 to 4 slots), with byte edits around them: the changes,
        /// through the log, rebuild every byte, and never take more than
        /// the same diff as byte ranges.
        #[test]
        fn shifted_pages_replay_exactly_and_never_log_more_than_ranges(
            seed in any::<u8>(),
            n in 20usize..1500,
            shifts in proptest::collection::vec((any::<usize>(), 1usize..5, any::<bool>()), 0..4),
            edits in proptest::collection::vec((32usize..4096, 1usize..40, any::<u8>()), 0..6),
        ) {
            let before = slotted(n, seed);
            let mut after = before.clone();
            let end = 44 + 2 * n;
            for (at, k, right) in shifts {
                let at = 44 + 2 * (at % n);
                let d = 2 * k;
                if right && end + d <= 4096 {
                    after.copy_within(at..end, at + d);
                    after[at..at + d].fill(seed ^ 0x5a);
                } else if !right && at + d < end {
                    after.copy_within(at + d..end, at);
                }
            }
            for (off, len, v) in edits {
                let e = (off + len).min(4096);
                after[off..e].fill(v);
            }
            let changes = diff_changes(&before, &after);
            let ranges: Vec<Change> =
                diff_ranges(&before, &after).into_iter().map(|(s, e)| Change::Bytes(s, e)).collect();
            prop_assert!(encoded_len(&changes) <= encoded_len(&ranges));
            let page = replay(&before, &after, &changes);
            for i in 0..4096 {
                if !(0..4).contains(&i) && !(12..20).contains(&i) {
                    prop_assert_eq!(page[i], after[i], "byte {}", i);
                }
            }
        }

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

    #[test]
    fn log_header_and_checkpoint_decode_never_panic_on_random_bytes(
        b in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let _ = LogFileHeader::decode(&b);
        let _ = Checkpoint::open(&b);
        let _ = Checkpoint::stored(&b);
    }

    #[test]
    fn resealed_log_headers_round_trip_or_fail(
        edits in proptest::collection::vec((12usize..36, any::<u8>()), 1..6),
    ) {
        let mut b = vec![0u8; 40];
        log_header().encode(&mut b);
        for (off, v) in edits {
            b[off] = v;
        }
        reseal(&mut b, 36);
        if let Ok(h) = LogFileHeader::decode(&b) {
            prop_assert!(h.file_size > LOG_FILE_HDR && h.file_index < h.n_files);
            let mut again = vec![0u8; 40];
            h.encode(&mut again);
            prop_assert_eq!(again, b);
        }
    }

    #[test]
    fn resealed_checkpoints_round_trip_or_fail(
        no in any::<u64>(),
        lsn in any::<u64>(),
        epoch in any::<u32>(),
        epoch_lsn in any::<u64>(),
    ) {
        let mut b = [0u8; CHECKPOINT_LEN];
        let cp = Checkpoint { no, lsn, epoch, epoch_lsn };
        cp.encode(&mut b);
        match Checkpoint::decode(&b) {
            Some(got) => prop_assert_eq!(got, cp),
            None => prop_assert!(no == 0 || lsn < START_LSN),
        }
    }

    #[test]
    fn decode_group_never_panics_on_random_bytes(
        b in proptest::collection::vec(any::<u8>(), 0..96),
        lsn in any::<u64>(),
    ) {
        let _ = decode_group(&b, lsn);
        if b.len() >= 16 {
            let _ = decode_group(&b, get_u64(&b, 8));
        }
    }

    #[test]
    fn resealed_group_mutations_decode_within_the_buffer(
        payload in proptest::collection::vec(any::<u8>(), 0..64),
        edits in proptest::collection::vec((0usize..12, any::<u8>()), 1..4),
        lsn in 8192u64..1 << 40,
    ) {
        let mut g = Vec::new();
        encode_group(kind::MTR, lsn, 3, &payload, &mut g);
        prop_assert_eq!(decode_group(&g, lsn), Some((GroupHeader { len: payload.len() as u32, kind: kind::MTR, lsn, epoch: 3 }, &payload[..])));
        for (off, v) in edits {
            g[off] = v;
        }
        let len = (get_u32(&g, 0) as usize).min(g.len() - GROUP_HDR);
        let at = (lsn & !0xffff_ffff) | u64::from(get_u32(&g, 8));
        let crc = group_crc(at, &g[..12], &g[GROUP_HDR..GROUP_HDR + len]);
        put_u32(&mut g, 12, crc);
        if let Some((h, p)) = decode_group(&g, at) {
            prop_assert_eq!(h.len as usize, p.len());
            prop_assert_eq!(p, &g[GROUP_HDR..GROUP_HDR + p.len()]);
        }
    }

    #[test]
    fn decode_page_records_never_panics_on_random_bytes(
        b in proptest::collection::vec(any::<u8>(), 0..200),
        page_size in prop_oneof![Just(0usize), Just(4096), Just(65536)],
    ) {
        if let Ok(recs) = decode_page_records(&b, page_size) {
            let mut page = vec![0u8; page_size];
            for r in &recs {
                apply_page_record(&mut page, r);
            }
            prop_assert_eq!(reencode(&recs), b);
        }
    }

    #[test]
    fn records_split_in_place_apply_as_the_decoded_ones(
        edits in proptest::collection::vec((0usize..4096, 1usize..300, any::<u8>()), 1..4),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
        seed in any::<u8>(),
    ) {
        let mut b = mtr_payload(&edits);
        for (i, v) in flips {
            let at = i.index(b.len());
            b[at] = v;
        }
        let mut split = Vec::new();
        let r = split_page_records(&b, 4096, |r| split.push(r));
        match decode_page_records(&b, 4096) {
            Ok(recs) => {
                prop_assert!(r.is_ok());
                prop_assert_eq!(split.len(), recs.len());
                let mut want = vec![seed; 4096];
                let mut got = vec![seed; 4096];
                for (d, s) in recs.iter().zip(&split) {
                    prop_assert_eq!((d.space, d.page_no, d.zeroed), (s.space, s.page_no, s.zeroed));
                    apply_page_record(&mut want, d);
                    apply_page_record_ref(&mut got, s);
                }
                prop_assert_eq!(want, got);
            }
            Err(e) => prop_assert_eq!(r, Err(e)),
        }
    }

    #[test]
    fn mutated_page_records_apply_in_bounds_or_fail(
        edits in proptest::collection::vec((0usize..4096, 1usize..300, any::<u8>()), 1..4),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let good = mtr_payload(&edits);
        prop_assert_eq!(reencode(&decode_page_records(&good, 4096).unwrap()), good.clone());
        let mut b = good;
        for (i, v) in flips {
            let at = i.index(b.len());
            b[at] = v;
        }
        // The group's CRC would cover these bytes; only the decoder's own
        // checks stand between a mutation and the page.
        if let Ok(recs) = decode_page_records(&b, 4096) {
            let mut page = vec![0u8; 4096];
            for r in &recs {
                apply_page_record(&mut page, r);
            }
            prop_assert_eq!(reencode(&recs), b);
        }
    }
}
