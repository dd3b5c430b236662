//! The data-file header: the first page-size block of every data file.
//!
//! | offset | size | field                                            |
//! |-------:|-----:|--------------------------------------------------|
//! | 0      | 8    | magic `KEELDATA`                                 |
//! | 8      | 4    | format version                                   |
//! | 12     | 4    | page size in bytes                               |
//! | 16     | 4    | space id                                         |
//! | 20     | 4    | index of this file among the space's files       |
//! | 24     | 4    | number of files of the space                     |
//! | 28     | 4    | pages per extent (the striping unit)             |
//! | 32     | 8    | creation id (random, equal in all files)         |
//! | 40     | 4    | CRC32C of bytes `[0, 40)`                        |
//!
//! The rest of the block is zero. The frame (magic, version, CRC) is a
//! [`Seal`]; [`FileHeader::decode`] also refuses geometry no database can
//! have, so that code which divides by the page size or loops over the
//! files can trust a decoded header.

use serde::Serialize;

use crate::page::coding::Seal;
use crate::page::{get_u32, get_u64, is_page_size, put_u32, put_u64};

/// Magic bytes at the start of every data file.
pub const MAGIC: &[u8; 8] = b"KEELDATA";
/// Current on-disk format version.
/// 3: large values in overflow chains (page types 7 and 8, the version
/// header's external flag, commit-record op kind 3), the space header's
/// dropped-root list moved to offset 68, catalog entries with their
/// creation LSN.
/// 2: rows carry version headers and the space has undo pages (multi-versioning).
/// Older files are refused (their layout is not this build's).
pub const FORMAT_VERSION: u32 = 3;
/// Bytes of the header that carry meaning (the rest of the block is zero).
pub const HEADER_LEN: usize = 44;
/// Most data files a space can have (the `data_files` option's limit).
pub const MAX_DATA_FILES: u32 = 64;

const CRC_AT: usize = 40;
const SEAL: Seal = Seal {
    what: "data file header",
    kind: "Keel data file",
    magic: MAGIC,
    version: Some(FORMAT_VERSION),
};

const _: () = assert!(CRC_AT + 4 == HEADER_LEN && SEAL.body_at() == 12);

/// Decoded data-file header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FileHeader {
    /// Format version.
    pub version: u32,
    /// Page size in bytes.
    pub page_size: u32,
    /// Tablespace id.
    pub space_id: u32,
    /// This file's index.
    pub file_index: u32,
    /// Number of files in the space.
    pub n_files: u32,
    /// Pages per extent.
    pub extent_pages: u32,
    /// Random id shared by the files of one space.
    pub creation_id: u64,
}

impl FileHeader {
    /// Encode into the start of `b` (at least [`HEADER_LEN`] bytes).
    pub fn encode(&self, b: &mut [u8]) {
        SEAL.seal(b, CRC_AT, |b| {
            // The version is a field of the struct: write what it says.
            put_u32(b, 8, self.version);
            put_u32(b, 12, self.page_size);
            put_u32(b, 16, self.space_id);
            put_u32(b, 20, self.file_index);
            put_u32(b, 24, self.n_files);
            put_u32(b, 28, self.extent_pages);
            put_u64(b, 32, self.creation_id);
        });
    }

    /// Decode, checking length, magic, checksum, version and geometry. The
    /// error says what is wrong.
    pub fn decode(b: &[u8]) -> Result<FileHeader, String> {
        SEAL.open(b, CRC_AT)?;
        let h = FileHeader {
            version: get_u32(b, 8),
            page_size: get_u32(b, 12),
            space_id: get_u32(b, 16),
            file_index: get_u32(b, 20),
            n_files: get_u32(b, 24),
            extent_pages: get_u32(b, 28),
            creation_id: get_u64(b, 32),
        };
        h.check_geometry()?;
        Ok(h)
    }

    /// Values no database has, checksum or not.
    fn check_geometry(&self) -> Result<(), String> {
        if !is_page_size(self.page_size as usize) {
            return Err(format!(
                "page size {} is not a power of two in 4096..=65536",
                self.page_size
            ));
        }
        if !(1..=MAX_DATA_FILES).contains(&self.n_files) {
            return Err(format!(
                "{} data files: a space has 1..={MAX_DATA_FILES}",
                self.n_files
            ));
        }
        if self.file_index >= self.n_files {
            return Err(format!(
                "file index {} of only {} files",
                self.file_index, self.n_files
            ));
        }
        if self.extent_pages == 0 {
            return Err("extent of 0 pages".into());
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> FileHeader {
        FileHeader {
            version: FORMAT_VERSION,
            page_size: 16384,
            space_id: 0,
            file_index: 2,
            n_files: 4,
            extent_pages: 64,
            creation_id: 0x1234_5678_9abc_def0,
        }
    }

    #[test]
    fn round_trip() {
        let mut b = vec![0u8; 4096];
        sample().encode(&mut b);
        assert_eq!(FileHeader::decode(&b).unwrap(), sample());
    }

    #[test]
    fn bytes_are_the_documented_table() {
        let mut b = vec![0xaau8; 64];
        sample().encode(&mut b);
        assert_eq!(&b[..8], b"KEELDATA");
        let words: Vec<u32> = (8..40).step_by(4).map(|o| get_u32(&b, o)).collect();
        assert_eq!(words[..6], [3, 16384, 0, 2, 4, 64]);
        assert_eq!(get_u64(&b, 32), 0x1234_5678_9abc_def0);
        assert_eq!(get_u32(&b, 40), crc32c::crc32c(&b[..40]));
        assert_eq!(&b[44..], &[0xaa; 20]);
    }

    #[test]
    fn impossible_geometry_is_rejected_despite_a_good_checksum() {
        type Spoil = fn(&mut FileHeader);
        let cases: [(Spoil, &str); 7] = [
            (|h| h.page_size = 0, "page size 0"),
            (|h| h.page_size = 12288, "page size 12288"),
            (|h| h.page_size = 1 << 17, "page size 131072"),
            (|h| h.n_files = 0, "0 data files"),
            (|h| h.n_files = 65, "65 data files"),
            (|h| h.file_index = 4, "file index 4 of only 4"),
            (|h| h.extent_pages = 0, "extent of 0 pages"),
        ];
        for (spoil, msg) in cases {
            let mut h = sample();
            spoil(&mut h);
            let mut b = vec![0u8; 64];
            h.encode(&mut b);
            let e = FileHeader::decode(&b).unwrap_err();
            assert!(e.contains(msg), "{e} lacks {msg}");
        }
    }

    #[test]
    fn every_flipped_byte_is_rejected() {
        let mut b = vec![0u8; 64];
        sample().encode(&mut b);
        for i in 0..HEADER_LEN {
            let mut c = b.clone();
            c[i] ^= 1;
            assert!(FileHeader::decode(&c).is_err(), "byte {i}");
        }
        assert!(FileHeader::decode(&b[..10]).is_err());
        assert!(FileHeader::decode(&[0u8; 64])
            .unwrap_err()
            .contains("magic"));
    }

    proptest! {
        #[test]
        fn decode_never_panics_on_random_bytes(b in proptest::collection::vec(any::<u8>(), 0..96)) {
            let _ = FileHeader::decode(&b);
        }

        #[test]
        fn resealed_mutations_decode_to_what_they_encode_or_fail(
            edits in proptest::collection::vec((12usize..40, any::<u8>()), 1..6),
        ) {
            let mut b = vec![0u8; 64];
            sample().encode(&mut b);
            for (off, v) in edits {
                b[off] = v;
            }
            let crc = crc32c::crc32c(&b[..40]);
            put_u32(&mut b, 40, crc);
            if let Ok(h) = FileHeader::decode(&b) {
                let mut again = vec![0u8; 64];
                h.encode(&mut again);
                prop_assert_eq!(again, b);
            }
        }
    }
}
