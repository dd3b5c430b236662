//! Compressed page images on disk (`page_compression = zstd`): MariaDB's
//! page compression, without punching holes.
//!
//! A page is compressed only on its way to its place in a data file, and
//! only where that saves at least one 4 KiB block: the stored image is
//! written from the page's offset up to the end of its last block, and the
//! rest of the page's slot keeps whatever it held (an older image, or
//! zeros). In memory, in the doublewrite area and in the redo log a page is
//! always whole. What is saved is bytes written, not space: the data files
//! stay allocated as before (punching a hole per page would cost the file
//! system's journal a write per page, the very bytes saved here).
//!
//! Layout of a stored compressed image (integers little-endian):
//!
//! | offset | size | field                                               |
//! |-------:|-----:|-----------------------------------------------------|
//! | 0      | 4    | CRC32C of bytes `[4, 32 + len)`                     |
//! | 4      | 4    | space id, as in the page                            |
//! | 8      | 4    | page number, as in the page                         |
//! | 12     | 8    | page LSN, as in the page                            |
//! | 20     | 2    | [`COMPRESSED_TAG`], where a page has its type       |
//! | 22     | 2    | algorithm: 1 = zstd                                 |
//! | 24     | 4    | `len`: bytes of the compressed frame                |
//! | 28     | 4    | zero                                                |
//! | 32     | len  | the zstd frame of the whole page, checksum stamped  |
//!
//! then zeros up to the next multiple of [`STORED_BLOCK`].
//!
//! # What a torn or stale slot reads as
//! The tag is no page type, so an image is never taken for a page without
//! being decoded: [`crate::page::verify_page`] refuses it. Decoding checks
//! the CRC over exactly the bytes written, then decompresses, and the page
//! that comes out is verified as any page read (its own checksum and id).
//! So a write torn at a block boundary, whose first block is new and whose
//! others are older (from a longer image, or a whole page before), fails
//! the CRC and is a torn page as before: repaired from the doublewrite
//! area under `doublewrite = on`, reported under `detect_only`. A stale
//! tail beyond the image is never read.
//!
//! # Bounds
//! A stored image is at most the page size less one block ([`encode`]
//! returns `None` otherwise), `len` is at most that less the header, and
//! [`decode`] checks `len` against the buffer before it reads: a property
//! test round-trips any page, and decodes any bytes without panicking.

use std::cell::RefCell;

use super::{get_u16, get_u32, put_u16, put_u32, PageCheckError, PAGE_HEADER_SIZE};

/// The unit a stored image is rounded up to: the block the file system and
/// an O_DIRECT write work in.
pub const STORED_BLOCK: usize = 4096;
/// The tag a stored compressed image carries where a page has its type
/// ("KZ"): no page type has it.
pub const COMPRESSED_TAG: u16 = u16::from_le_bytes(*b"KZ");
/// The algorithm field's value for zstd.
pub const ALGO_ZSTD: u16 = 1;
/// The zstd level pages are compressed at: the fastest of the standard
/// levels, which on the OLTP tables' leaves stores 16 KiB pages in about
/// half their blocks (levels up to 3 saved under 1 % more).
pub const ZSTD_LEVEL: i32 = 1;

const OFF_TAG: usize = 20;
const OFF_ALGO: usize = 22;
const OFF_LEN: usize = 24;

const _: () = assert!(PAGE_HEADER_SIZE == 32 && OFF_LEN + 8 == PAGE_HEADER_SIZE);

/// Whether `raw` (bytes read from a page's slot) holds a compressed image.
pub fn is_compressed(raw: &[u8]) -> bool {
    raw.len() >= PAGE_HEADER_SIZE && get_u16(raw, OFF_TAG) == COMPRESSED_TAG
}

/// One thread's zstd contexts, each made on its first use: a context
/// allocates its tables once, not per page, and a thread that only reads
/// never makes a compressor.
#[derive(Default)]
struct Codec {
    compressor: Option<zstd::bulk::Compressor<'static>>,
    decompressor: Option<zstd::bulk::Decompressor<'static>>,
    /// A copy of the stored image while it is decoded into its buffer.
    scratch: Vec<u8>,
}

thread_local! {
    static CODEC: RefCell<Codec> = RefCell::new(Codec::default());
}

/// `f` on this thread's contexts; `None` while the thread's locals are
/// being destroyed (a database closed from another thread-local's drop
/// still writes its pages: whole, then).
fn with_codec<T>(f: impl FnOnce(&mut Codec) -> T) -> Option<T> {
    CODEC.try_with(|c| f(&mut c.borrow_mut())).ok()
}

/// Compress `page` (checksum stamped) into `out` (at least as long) as a
/// stored image, and return its length: a multiple of [`STORED_BLOCK`]
/// below the page size. `None`, with `out` unspecified, where that would
/// not save a block (a page of 4 KiB never does) or zstd fails.
pub fn encode(page: &[u8], out: &mut [u8]) -> Option<usize> {
    let max_stored = page.len().checked_sub(STORED_BLOCK)?;
    if max_stored <= PAGE_HEADER_SIZE || out.len() < page.len() {
        return None;
    }
    // A frame that does not fit is zstd's "destination too small": not
    // worth storing compressed.
    let len = with_codec(|c| {
        if c.compressor.is_none() {
            c.compressor = zstd::bulk::Compressor::new(ZSTD_LEVEL).ok();
        }
        c.compressor
            .as_mut()?
            .compress_to_buffer(page, &mut out[PAGE_HEADER_SIZE..max_stored])
            .ok()
    })??;
    let end = PAGE_HEADER_SIZE + len;
    let stored = end.next_multiple_of(STORED_BLOCK);
    debug_assert!(stored <= max_stored);
    out[end..stored].fill(0);
    out[4..OFF_TAG].copy_from_slice(&page[4..OFF_TAG]);
    put_u16(out, OFF_TAG, COMPRESSED_TAG);
    put_u16(out, OFF_ALGO, ALGO_ZSTD);
    put_u32(out, OFF_LEN, u32::try_from(len).ok()?);
    put_u32(out, OFF_LEN + 4, 0);
    let crc = crc32c::crc32c(&out[4..end]);
    put_u32(out, 0, crc);
    Some(stored)
}

/// Decode the compressed image in `buf` (a page's slot as read, page-size
/// long) into the page it holds, in place. On an error `buf` is as it was
/// read. The page that comes out is not verified here: the caller verifies
/// it as any page read.
pub fn decode(buf: &mut [u8]) -> Result<(), PageCheckError> {
    if !is_compressed(buf) {
        return Err(PageCheckError::Compressed("not a compressed image"));
    }
    if get_u16(buf, OFF_ALGO) != ALGO_ZSTD {
        return Err(PageCheckError::Compressed("unknown compression algorithm"));
    }
    let len = get_u32(buf, OFF_LEN) as usize;
    let end = PAGE_HEADER_SIZE
        .checked_add(len)
        .filter(|&e| e <= buf.len())
        .ok_or(PageCheckError::Compressed(
            "compressed length past the page",
        ))?;
    let stored = get_u32(buf, 0);
    let computed = crc32c::crc32c(&buf[4..end]);
    if stored != computed {
        return Err(PageCheckError::Checksum { stored, computed });
    }
    let page_len = buf.len();
    let decoded = with_codec(|c| {
        if c.decompressor.is_none() {
            c.decompressor = zstd::bulk::Decompressor::new().ok();
        }
        let Some(d) = c.decompressor.as_mut() else {
            return Err(PageCheckError::Compressed(
                "no zstd context (out of memory)",
            ));
        };
        c.scratch.clear();
        c.scratch.extend_from_slice(buf);
        let frame = &c.scratch[PAGE_HEADER_SIZE..end];
        match d.decompress_to_buffer(frame, &mut *buf) {
            Ok(n) if n == page_len => Ok(()),
            r => {
                buf.copy_from_slice(&c.scratch);
                Err(PageCheckError::Compressed(if r.is_ok() {
                    "the frame holds less than a page"
                } else {
                    "the frame does not decompress"
                }))
            }
        }
    });
    decoded.unwrap_or(Err(PageCheckError::Compressed(
        "read while the thread exits: no zstd context",
    )))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::page::{init_page, stamp_checksum, verify_page, PageId, PageType};
    use proptest::prelude::*;

    /// A leaf-like page: digits, as the OLTP rows hold, over three
    /// quarters of it (16 KiB of it compress to two blocks).
    fn page(size: usize, seed: u64) -> Vec<u8> {
        let mut p = vec![0u8; size];
        init_page(&mut p, PageId::new(0, 9), PageType::BtreeLeaf);
        let mut x = seed | 1;
        for b in &mut p[64..size * 3 / 4] {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = b'0' + (x % 10) as u8;
        }
        stamp_checksum(&mut p);
        p
    }

    #[test]
    fn a_compressible_page_is_stored_in_fewer_blocks_and_decodes_to_itself() {
        let p = page(16384, 7);
        let mut out = vec![0xeeu8; 16384];
        let stored = encode(&p, &mut out).expect("compressible");
        assert!(
            stored.is_multiple_of(STORED_BLOCK) && stored < 16384,
            "{stored}"
        );
        assert!(is_compressed(&out));
        // The image is refused as a page until it is decoded.
        assert!(verify_page(&out, PageId::new(0, 9)).is_err());
        decode(&mut out).unwrap();
        assert_eq!(out, p);
        assert_eq!(verify_page(&out, PageId::new(0, 9)), Ok(()));
    }

    #[test]
    fn a_4k_page_or_an_incompressible_one_is_not_compressed() {
        let p = page(4096, 3);
        assert_eq!(encode(&p, &mut vec![0u8; 4096]), None);
        let mut noise = vec![0u8; 16384];
        let mut x = 99u64;
        for b in &mut noise {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        assert_eq!(encode(&noise, &mut vec![0u8; 16384]), None);
    }

    #[test]
    fn a_torn_image_fails_its_checksum_and_is_left_as_read() {
        let p = page(16384, 11);
        let mut out = vec![0u8; 16384];
        let stored = encode(&p, &mut out).unwrap();
        assert!(stored >= 2 * STORED_BLOCK, "the test needs two blocks");
        // The second block is still the older whole page's.
        let mut torn = out.clone();
        torn[STORED_BLOCK..].copy_from_slice(&page(16384, 12)[STORED_BLOCK..]);
        let before = torn.clone();
        assert!(matches!(
            decode(&mut torn),
            Err(PageCheckError::Checksum { .. })
        ));
        assert_eq!(torn, before);
    }

    #[test]
    fn a_frame_with_a_good_checksum_that_does_not_decompress_leaves_the_buffer() {
        let p = page(16384, 5);
        let mut out = vec![0u8; 16384];
        encode(&p, &mut out).unwrap();
        // Damage the frame, then make its CRC right: only zstd can tell.
        out[PAGE_HEADER_SIZE + 5] ^= 0xff;
        out[PAGE_HEADER_SIZE + 6] ^= 0x55;
        let len = get_u32(&out, OFF_LEN) as usize;
        let crc = crc32c::crc32c(&out[4..PAGE_HEADER_SIZE + len]);
        put_u32(&mut out, 0, crc);
        let before = out.clone();
        if decode(&mut out).is_err() {
            assert_eq!(out, before);
        } else {
            // zstd decoded it to something: the page's own checksum fails.
            assert!(verify_page(&out, PageId::new(0, 9)).is_err());
        }
    }

    proptest! {
        #[test]
        fn any_page_round_trips(seed in any::<u64>(), fill in 0usize..16384, size_log in 12u32..=16) {
            let size = 1usize << size_log;
            let mut p = page(size, seed);
            let fill = fill.min(size - 64);
            for (i, b) in p[64..64 + fill].iter_mut().enumerate() {
                *b = (seed >> (i % 61)) as u8;
            }
            stamp_checksum(&mut p);
            let mut out = vec![0u8; size];
            if let Some(stored) = encode(&p, &mut out) {
                prop_assert!(stored.is_multiple_of(STORED_BLOCK) && stored + STORED_BLOCK <= size);
                // What lies past the image is never read.
                out[stored..].fill(0xa5);
                decode(&mut out).unwrap();
                prop_assert_eq!(out, p);
            }
        }

        #[test]
        fn any_bytes_decode_without_panicking(mut raw in proptest::collection::vec(any::<u8>(), 4096..=4200), len in any::<u32>(), algo in 0u16..3) {
            raw.truncate(4096);
            put_u16(&mut raw, OFF_TAG, COMPRESSED_TAG);
            put_u16(&mut raw, OFF_ALGO, algo);
            put_u32(&mut raw, OFF_LEN, len % 5000);
            let end = (PAGE_HEADER_SIZE + (len % 5000) as usize).min(4096);
            let crc = crc32c::crc32c(&raw[4..end]);
            put_u32(&mut raw, 0, crc);
            let before = raw.clone();
            if decode(&mut raw).is_err() {
                prop_assert_eq!(raw, before);
            }
        }
    }
}
