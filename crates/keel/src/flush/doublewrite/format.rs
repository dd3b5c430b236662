//! On-disk encoding of the doublewrite files (see `docs/format.md`,
//! "Doublewrite files"): the file header and the area header, both sealed
//! headers ([`Seal`]). Decoding accepts any bytes; a header that decodes has
//! a geometry the areas can be located with.

use serde::Serialize;

use crate::page::coding::Seal;
use crate::page::Lsn;
use crate::page::{get_u32, get_u64, is_page_size, put_u32, put_u64, PageId};

/// Magic bytes at the start of every doublewrite file.
pub const FILE_MAGIC: &[u8; 8] = b"KEELDBLF";
/// Magic bytes at the start of every area written with its page images
/// (`doublewrite = on`).
pub const AREA_MAGIC: &[u8; 8] = b"KEELDBLW";
/// Magic bytes at the start of an area written with entries only, no page
/// images (`doublewrite = detect_only`): its slots hold whatever an earlier
/// batch left there, never a copy of the pages its entries name.
pub const AREA_ENTRIES_MAGIC: &[u8; 8] = b"KEELDBLE";
/// Format version of both headers.
pub const VERSION: u32 = 1;
/// Bytes of the file header that carry meaning (CRC included).
pub const FILE_HEADER_LEN: usize = 52;
/// Bytes of the area header before its entries.
pub const AREA_FIXED_LEN: usize = 32;
/// Bytes of one area-header entry: space, page number, page LSN.
pub const ENTRY_LEN: usize = 16;
/// Most doublewrite files, areas and slots per area any geometry has (the
/// bounds `Geometry::validate` enforces before a set is formatted).
const MAX_FILES: u32 = 1024;
const MAX_AREAS: u32 = 65536;
const MAX_PAGES_PER_AREA: u32 = 65536;

const FILE_SEAL: Seal = Seal {
    what: "doublewrite file header",
    kind: "Keel doublewrite file",
    magic: FILE_MAGIC,
    version: Some(VERSION),
};
const AREA_SEAL: Seal = Seal {
    what: "area header",
    kind: "doublewrite area",
    magic: AREA_MAGIC,
    version: Some(VERSION),
};
const AREA_ENTRIES_SEAL: Seal = Seal {
    what: "area header (entries only)",
    kind: "doublewrite area",
    magic: AREA_ENTRIES_MAGIC,
    version: Some(VERSION),
};

const _: () = assert!(
    FILE_SEAL.body_at() == 12 && AREA_SEAL.body_at() == 12 && AREA_ENTRIES_SEAL.body_at() == 12
);

/// Bytes an area header with `count` entries occupies (CRC included).
pub const fn area_header_len(count: usize) -> usize {
    AREA_FIXED_LEN + count * ENTRY_LEN + 4
}

/// The header block at offset 0 of `dblwr-{i}.keel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FileHeader {
    /// Page size in bytes.
    pub page_size: u32,
    /// Index `i` of this file.
    pub file_index: u32,
    /// Number of doublewrite files.
    pub n_files: u32,
    /// Number of areas over all files.
    pub n_areas: u32,
    /// Areas stored in this file.
    pub areas_in_file: u32,
    /// Page slots per area.
    pub pages_per_area: u32,
    /// The data files' creation id.
    pub creation_id: u64,
}

impl FileHeader {
    /// Bytes of the header that carry meaning (CRC included).
    pub const LEN: usize = FILE_HEADER_LEN;
    /// Format version of the file and area headers.
    pub const VERSION: u32 = VERSION;

    /// Encode into the start of `b` (at least [`Self::LEN`] bytes).
    pub fn encode(&self, b: &mut [u8]) {
        FILE_SEAL.seal(b, FILE_HEADER_LEN - 4, |b| {
            put_u32(b, 12, self.page_size);
            put_u32(b, 16, self.file_index);
            put_u32(b, 20, self.n_files);
            put_u32(b, 24, self.n_areas);
            put_u32(b, 28, self.areas_in_file);
            put_u32(b, 32, self.pages_per_area);
            put_u64(b, 40, self.creation_id);
        });
    }

    /// Decode, checking magic, checksum, version and geometry; the error
    /// says what is wrong.
    pub fn decode(b: &[u8]) -> Result<FileHeader, String> {
        FILE_SEAL.open(b, FILE_HEADER_LEN - 4)?;
        let h = FileHeader {
            page_size: get_u32(b, 12),
            file_index: get_u32(b, 16),
            n_files: get_u32(b, 20),
            n_areas: get_u32(b, 24),
            areas_in_file: get_u32(b, 28),
            pages_per_area: get_u32(b, 32),
            creation_id: get_u64(b, 40),
        };
        h.check_geometry()?;
        Ok(h)
    }

    fn check_geometry(&self) -> Result<(), String> {
        if !is_page_size(self.page_size as usize) {
            return Err(format!(
                "page size {} is not a power of two in 4096..=65536",
                self.page_size
            ));
        }
        if !(1..=MAX_FILES).contains(&self.n_files) || self.file_index >= self.n_files {
            return Err(format!(
                "file index {} of {} files (1..={MAX_FILES})",
                self.file_index, self.n_files
            ));
        }
        if !(1..=MAX_AREAS).contains(&self.n_areas)
            || !(1..=MAX_PAGES_PER_AREA).contains(&self.pages_per_area)
        {
            return Err(format!(
                "{} areas of {} pages (1..={MAX_AREAS} areas of 1..={MAX_PAGES_PER_AREA})",
                self.n_areas, self.pages_per_area
            ));
        }
        // Areas are dealt round-robin: file f holds areas f, f + F, f + 2F, ...
        let want = (self.n_areas + self.n_files - 1 - self.file_index) / self.n_files;
        if self.areas_in_file != want {
            return Err(format!(
                "{} areas in file {} of {}, but {} areas dealt over the files give it {want}",
                self.areas_in_file, self.file_index, self.n_files, self.n_areas
            ));
        }
        Ok(())
    }
}

/// One page copy named by an area header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// The page.
    pub id: PageId,
    /// Its page LSN: a slot whose copy carries another LSN is stale.
    pub lsn: Lsn,
}

/// The header of one area: which batch it holds and the pages in its slots.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AreaHeader {
    /// Page size in bytes.
    pub page_size: u32,
    /// Index of the area over all files.
    pub area: u32,
    /// Batch sequence number, increasing over the whole doublewrite.
    pub seq: u64,
    /// Whether the slots hold the pages' images (`on`), or the header was
    /// written alone (`detect_only`: magic `KEELDBLE`).
    pub images: bool,
    /// Entry `k` describes slot `k`.
    pub entries: Vec<Entry>,
}

impl AreaHeader {
    /// Bytes of the header before its entries.
    pub const FIXED_LEN: usize = AREA_FIXED_LEN;
    /// Bytes of one entry.
    pub const ENTRY_LEN: usize = ENTRY_LEN;

    /// Encode into `b`, which must hold [`area_header_len`] bytes; the rest
    /// of `b` is left alone.
    pub fn encode(&self, b: &mut [u8]) {
        let end = AREA_FIXED_LEN + self.entries.len() * ENTRY_LEN;
        let seal = if self.images {
            AREA_SEAL
        } else {
            AREA_ENTRIES_SEAL
        };
        seal.seal(b, end, |b| {
            put_u32(b, 12, self.page_size);
            put_u32(b, 16, self.area);
            put_u64(b, 20, self.seq);
            put_u32(b, 28, self.entries.len() as u32);
            for (k, e) in self.entries.iter().enumerate() {
                let off = AREA_FIXED_LEN + k * ENTRY_LEN;
                put_u32(b, off, e.id.space);
                put_u32(b, off + 4, e.id.page_no);
                put_u64(b, off + 8, e.lsn);
            }
        });
    }

    /// Decode the header blocks of an area. `Ok(None)`: the area was never
    /// written (its fixed part is zero). An error says what is wrong; the
    /// caller skips the area. `max_count` is the geometry's pages per area.
    pub fn decode(b: &[u8], max_count: usize) -> Result<Option<AreaHeader>, String> {
        let Some(fixed) = b.get(..AREA_FIXED_LEN) else {
            return Err(format!("area header is {} bytes", b.len()));
        };
        if fixed.iter().all(|&x| x == 0) {
            return Ok(None);
        }
        let seal = if AREA_ENTRIES_SEAL.check_magic(b).is_ok() {
            AREA_ENTRIES_SEAL
        } else {
            AREA_SEAL.check_magic(b)?;
            AREA_SEAL
        };
        let count = get_u32(b, 28) as usize;
        // The count is read before the CRC that covers it, so bound it first.
        let fits = count
            .checked_mul(ENTRY_LEN)
            .and_then(|e| e.checked_add(AREA_FIXED_LEN + 4))
            .is_some_and(|len| len <= b.len());
        if count > max_count || !fits {
            return Err(format!(
                "page count {count} exceeds the {max_count} slots of an area"
            ));
        }
        seal.open(b, AREA_FIXED_LEN + count * ENTRY_LEN)?;
        let page_size = get_u32(b, 12);
        if !is_page_size(page_size as usize) {
            return Err(format!("area header names page size {page_size}"));
        }
        let entries = (0..count)
            .map(|k| {
                let off = AREA_FIXED_LEN + k * ENTRY_LEN;
                Entry {
                    id: PageId::new(get_u32(b, off), get_u32(b, off + 4)),
                    lsn: get_u64(b, off + 8),
                }
            })
            .collect();
        Ok(Some(AreaHeader {
            page_size,
            area: get_u32(b, 16),
            seq: get_u64(b, 20),
            images: seal.magic == AREA_MAGIC,
            entries,
        }))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn file_header() -> FileHeader {
        FileHeader {
            page_size: 4096,
            file_index: 1,
            n_files: 2,
            n_areas: 5,
            areas_in_file: 2,
            pages_per_area: 8,
            creation_id: 0xfeed_beef_0123_4567,
        }
    }

    fn area_header() -> AreaHeader {
        AreaHeader {
            page_size: 4096,
            area: 3,
            seq: 77,
            images: true,
            entries: vec![
                Entry {
                    id: PageId::new(0, 9),
                    lsn: 1234,
                },
                Entry {
                    id: PageId::new(0, 10),
                    lsn: 5678,
                },
            ],
        }
    }

    #[test]
    fn file_header_round_trip_and_corruption() {
        let mut b = vec![0u8; 4096];
        file_header().encode(&mut b);
        assert_eq!(FileHeader::decode(&b).unwrap(), file_header());
        for i in 0..FILE_HEADER_LEN {
            let mut c = b.clone();
            c[i] ^= 1;
            assert!(FileHeader::decode(&c).is_err(), "byte {i}");
        }
        assert!(FileHeader::decode(&b[..20]).is_err());
        assert!(FileHeader::decode(&[0u8; 64])
            .unwrap_err()
            .contains("magic"));
    }

    #[test]
    fn area_header_round_trip_and_corruption() {
        let h = area_header();
        let mut b = vec![0u8; 4096];
        h.encode(&mut b);
        assert_eq!(AreaHeader::decode(&b, 8).unwrap(), Some(h.clone()));
        for i in 0..area_header_len(2) {
            let mut c = b.clone();
            c[i] ^= 0x40;
            assert!(AreaHeader::decode(&c, 8).is_err(), "byte {i}");
        }
        assert!(AreaHeader::decode(&b, 1).unwrap_err().contains("exceeds"));
        assert_eq!(AreaHeader::decode(&[0u8; 4096], 8).unwrap(), None);
    }

    /// An entries-only header (`detect_only`) differs from a full one in
    /// its magic alone, and decodes back as entries-only: recovery must
    /// never take its slots for copies.
    #[test]
    fn an_entries_only_header_is_told_by_its_magic() {
        let h = AreaHeader {
            images: false,
            ..area_header()
        };
        let (mut full, mut entries) = (vec![0u8; 4096], vec![0u8; 4096]);
        area_header().encode(&mut full);
        h.encode(&mut entries);
        assert_eq!(&entries[..8], b"KEELDBLE");
        assert_eq!(&entries[8..64], &full[8..64], "same layout after the magic");
        assert_eq!(AreaHeader::decode(&entries, 8).unwrap(), Some(h));
        for i in 0..area_header_len(2) {
            let mut c = entries.clone();
            c[i] ^= 0x40;
            assert!(AreaHeader::decode(&c, 8).is_err(), "byte {i}");
        }
    }

    #[test]
    fn bytes_are_the_documented_tables() {
        let mut b = vec![0xccu8; 64];
        file_header().encode(&mut b);
        assert_eq!(&b[..8], b"KEELDBLF");
        let words: Vec<u32> = (8..40).step_by(4).map(|o| get_u32(&b, o)).collect();
        assert_eq!(words, [1, 4096, 1, 2, 5, 2, 8, 0]);
        assert_eq!(get_u64(&b, 40), 0xfeed_beef_0123_4567);
        assert_eq!(get_u32(&b, 48), crc32c::crc32c(&b[..48]));
        assert_eq!(&b[52..], &[0xcc; 12]);
        let mut a = vec![0xccu8; 80];
        area_header().encode(&mut a);
        assert_eq!(&a[..8], b"KEELDBLW");
        assert_eq!(
            (get_u32(&a, 8), get_u32(&a, 12), get_u32(&a, 16)),
            (1, 4096, 3)
        );
        assert_eq!((get_u64(&a, 20), get_u32(&a, 28)), (77, 2));
        assert_eq!(
            (get_u32(&a, 32), get_u32(&a, 36), get_u64(&a, 40)),
            (0, 9, 1234)
        );
        assert_eq!(
            (get_u32(&a, 48), get_u32(&a, 52), get_u64(&a, 56)),
            (0, 10, 5678)
        );
        assert_eq!(get_u32(&a, 64), crc32c::crc32c(&a[..64]));
        assert_eq!(&a[68..], &[0xcc; 12], "the rest of the block is left alone");
    }

    #[test]
    fn impossible_file_geometry_is_rejected_despite_a_good_checksum() {
        type Spoil = fn(&mut FileHeader);
        let cases: [(Spoil, &str); 7] = [
            (|h| h.page_size = 1000, "page size 1000"),
            (|h| h.n_files = 0, "of 0 files"),
            (|h| h.file_index = 2, "file index 2 of 2"),
            (|h| h.n_areas = 0, "0 areas"),
            (|h| h.pages_per_area = 0, "of 0 pages"),
            (|h| h.pages_per_area = 65537, "of 65537 pages"),
            (|h| h.areas_in_file = 3, "give it 2"),
        ];
        for (spoil, msg) in cases {
            let mut h = file_header();
            spoil(&mut h);
            let mut b = vec![0u8; 64];
            h.encode(&mut b);
            let e = FileHeader::decode(&b).unwrap_err();
            assert!(e.contains(msg), "{e} lacks {msg:?}");
        }
    }

    #[test]
    fn area_header_with_a_bad_page_size_is_rejected() {
        let mut h = area_header();
        h.page_size = 3;
        let mut b = vec![0u8; 4096];
        h.encode(&mut b);
        assert!(AreaHeader::decode(&b, 8)
            .unwrap_err()
            .contains("page size 3"));
        // A count that overflows the buffer is refused before the CRC is read.
        put_u32(&mut b, 28, u32::MAX);
        assert!(AreaHeader::decode(&b, usize::MAX)
            .unwrap_err()
            .contains("exceeds"));
    }

    fn reseal(b: &mut [u8], crc_at: usize) {
        let crc = crc32c::crc32c(&b[..crc_at]);
        put_u32(b, crc_at, crc);
    }

    proptest! {
        #[test]
        fn decoders_never_panic_on_random_bytes(
            b in proptest::collection::vec(any::<u8>(), 0..160),
            max_count in prop_oneof![Just(0usize), Just(8), Just(usize::MAX)],
        ) {
            let _ = FileHeader::decode(&b);
            let _ = AreaHeader::decode(&b, max_count);
        }

        #[test]
        fn resealed_file_headers_round_trip_or_fail(
            edits in proptest::collection::vec((12usize..48, any::<u8>()), 1..6),
        ) {
            let mut b = vec![0u8; FILE_HEADER_LEN];
            file_header().encode(&mut b);
            for (off, v) in edits {
                b[off] = v;
            }
            reseal(&mut b, 48);
            if let Ok(h) = FileHeader::decode(&b) {
                prop_assert!(h.file_index < h.n_files && h.areas_in_file <= h.n_areas);
                let mut again = vec![0u8; FILE_HEADER_LEN];
                h.encode(&mut again);
                // Bytes 36..40 are reserved: decoding ignores them.
                again[36..40].copy_from_slice(&b[36..40]);
                reseal(&mut again, 48);
                prop_assert_eq!(again, b);
            }
        }

        #[test]
        fn resealed_area_headers_round_trip_or_fail(
            edits in proptest::collection::vec((12usize..64, any::<u8>()), 1..6),
        ) {
            let mut b = vec![0u8; 128];
            area_header().encode(&mut b);
            for (off, v) in edits {
                b[off] = v;
            }
            let count = (get_u32(&b, 28) as usize).min(5);
            reseal(&mut b, area_header_len(count) - 4);
            if let Ok(Some(h)) = AreaHeader::decode(&b, 8) {
                prop_assert!(h.entries.len() <= 8);
                let mut again = b.clone();
                h.encode(&mut again);
                prop_assert_eq!(again, b);
            }
        }
    }
}
