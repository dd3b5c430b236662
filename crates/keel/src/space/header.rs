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
//! The rest of the block is zero.

use crate::page::{get_u32, get_u64, put_u32, put_u64};

/// Magic bytes at the start of every data file.
pub const MAGIC: &[u8; 8] = b"KEELDATA";
/// Current on-disk format version.
pub const FORMAT_VERSION: u32 = 1;
/// Bytes of the header that carry meaning (the rest of the block is zero).
pub const HEADER_LEN: usize = 44;

/// Decoded data-file header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
        b[..HEADER_LEN].fill(0);
        b[0..8].copy_from_slice(MAGIC);
        put_u32(b, 8, self.version);
        put_u32(b, 12, self.page_size);
        put_u32(b, 16, self.space_id);
        put_u32(b, 20, self.file_index);
        put_u32(b, 24, self.n_files);
        put_u32(b, 28, self.extent_pages);
        put_u64(b, 32, self.creation_id);
        let c = crc32c::crc32c(&b[..40]);
        put_u32(b, 40, c);
    }

    /// Decode, checking magic, checksum and version. The error says what is wrong.
    pub fn decode(b: &[u8]) -> Result<FileHeader, String> {
        if b.len() < HEADER_LEN {
            return Err(format!(
                "header is {} bytes, expected {HEADER_LEN}",
                b.len()
            ));
        }
        if &b[0..8] != MAGIC {
            return Err("not a Keel data file (bad magic)".into());
        }
        let stored = get_u32(b, 40);
        let computed = crc32c::crc32c(&b[..40]);
        if stored != computed {
            return Err(format!(
                "header checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ));
        }
        let version = get_u32(b, 8);
        if version != FORMAT_VERSION {
            return Err(format!(
                "format version {version}, this build reads version {FORMAT_VERSION}"
            ));
        }
        Ok(FileHeader {
            version,
            page_size: get_u32(b, 12),
            space_id: get_u32(b, 16),
            file_index: get_u32(b, 20),
            n_files: get_u32(b, 24),
            extent_pages: get_u32(b, 28),
            creation_id: get_u64(b, 32),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

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
}
