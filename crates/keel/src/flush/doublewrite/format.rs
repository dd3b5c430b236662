//! On-disk encoding of the doublewrite files (see `docs/format.md`,
//! "Doublewrite files"): the file header and the area header.

use crate::page::Lsn;
use crate::page::{get_u32, get_u64, put_u32, put_u64, PageId};

/// Magic bytes at the start of every doublewrite file.
pub const FILE_MAGIC: &[u8; 8] = b"KEELDBLF";
/// Magic bytes at the start of every written area.
pub const AREA_MAGIC: &[u8; 8] = b"KEELDBLW";
/// Format version of both headers.
pub const VERSION: u32 = 1;
/// Bytes of the file header that carry meaning (CRC included).
pub const FILE_HEADER_LEN: usize = 52;
/// Bytes of the area header before its entries.
pub const AREA_FIXED_LEN: usize = 32;
/// Bytes of one area-header entry: space, page number, page LSN.
pub const ENTRY_LEN: usize = 16;

/// Bytes an area header with `count` entries occupies (CRC included).
pub const fn area_header_len(count: usize) -> usize {
    AREA_FIXED_LEN + count * ENTRY_LEN + 4
}

/// The header block at offset 0 of `dblwr-{i}.keel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    /// Encode into the start of `b` (at least [`FILE_HEADER_LEN`] bytes).
    pub fn encode(&self, b: &mut [u8]) {
        b[..FILE_HEADER_LEN].fill(0);
        b[0..8].copy_from_slice(FILE_MAGIC);
        put_u32(b, 8, VERSION);
        put_u32(b, 12, self.page_size);
        put_u32(b, 16, self.file_index);
        put_u32(b, 20, self.n_files);
        put_u32(b, 24, self.n_areas);
        put_u32(b, 28, self.areas_in_file);
        put_u32(b, 32, self.pages_per_area);
        put_u64(b, 40, self.creation_id);
        let crc = crc32c::crc32c(&b[..48]);
        put_u32(b, 48, crc);
    }

    /// Decode, checking magic, checksum and version; the error says what is wrong.
    pub fn decode(b: &[u8]) -> Result<FileHeader, String> {
        if b.len() < FILE_HEADER_LEN {
            return Err(format!(
                "header is {} bytes, expected {FILE_HEADER_LEN}",
                b.len()
            ));
        }
        if &b[0..8] != FILE_MAGIC {
            return Err("not a Keel doublewrite file (bad magic)".into());
        }
        let stored = get_u32(b, 48);
        let computed = crc32c::crc32c(&b[..48]);
        if stored != computed {
            return Err(format!(
                "header checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ));
        }
        let version = get_u32(b, 8);
        if version != VERSION {
            return Err(format!(
                "format version {version}, this build reads version {VERSION}"
            ));
        }
        Ok(FileHeader {
            page_size: get_u32(b, 12),
            file_index: get_u32(b, 16),
            n_files: get_u32(b, 20),
            n_areas: get_u32(b, 24),
            areas_in_file: get_u32(b, 28),
            pages_per_area: get_u32(b, 32),
            creation_id: get_u64(b, 40),
        })
    }
}

/// One page copy named by an area header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The page.
    pub id: PageId,
    /// Its page LSN: a slot whose copy carries another LSN is stale.
    pub lsn: Lsn,
}

/// The header of one area: which batch it holds and the pages in its slots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AreaHeader {
    /// Page size in bytes.
    pub page_size: u32,
    /// Index of the area over all files.
    pub area: u32,
    /// Batch sequence number, increasing over the whole doublewrite.
    pub seq: u64,
    /// Entry `k` describes slot `k`.
    pub entries: Vec<Entry>,
}

impl AreaHeader {
    /// Encode into `b`, which must hold [`area_header_len`] bytes; the rest
    /// of `b` is left alone.
    pub fn encode(&self, b: &mut [u8]) {
        let end = AREA_FIXED_LEN + self.entries.len() * ENTRY_LEN;
        b[0..8].copy_from_slice(AREA_MAGIC);
        put_u32(b, 8, VERSION);
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
        let crc = crc32c::crc32c(&b[..end]);
        put_u32(b, end, crc);
    }

    /// Decode the header blocks of an area. `Ok(None)`: the area was never
    /// written (its fixed part is zero). An error says what is wrong; the
    /// caller skips the area. `max_count` is the geometry's pages per area.
    pub fn decode(b: &[u8], max_count: usize) -> Result<Option<AreaHeader>, String> {
        if b.len() < AREA_FIXED_LEN {
            return Err(format!("area header is {} bytes", b.len()));
        }
        if b[..AREA_FIXED_LEN].iter().all(|&x| x == 0) {
            return Ok(None);
        }
        if &b[0..8] != AREA_MAGIC {
            return Err("bad area magic".into());
        }
        let count = get_u32(b, 28) as usize;
        if count > max_count || area_header_len(count) > b.len() {
            return Err(format!(
                "page count {count} exceeds the {max_count} slots of an area"
            ));
        }
        let end = AREA_FIXED_LEN + count * ENTRY_LEN;
        let stored = get_u32(b, end);
        let computed = crc32c::crc32c(&b[..end]);
        if stored != computed {
            return Err(format!(
                "area header checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ));
        }
        let version = get_u32(b, 8);
        if version != VERSION {
            return Err(format!("area format version {version}, expected {VERSION}"));
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
            page_size: get_u32(b, 12),
            area: get_u32(b, 16),
            seq: get_u64(b, 20),
            entries,
        }))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

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
}
