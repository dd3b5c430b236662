//! Pages: identity, the common header every page carries, and checksums.
//!
//! Layout of the common header (all integers little-endian):
//!
//! | offset | size | field                                        |
//! |-------:|-----:|----------------------------------------------|
//! | 0      | 4    | CRC32C of bytes `[4, page_size)`             |
//! | 4      | 4    | space id                                     |
//! | 8      | 4    | page number                                  |
//! | 12     | 8    | page LSN (end LSN of the newest change)      |
//! | 20     | 2    | page type ([`PageType`])                     |
//! | 22     | 2    | reserved, zero                               |
//! | 24     | 4    | on a table's root: the hidden root of a      |
//! |        |      | pending bulk load (`btree::node`); else zero |
//! | 28     | 4    | reserved, zero                               |
//!
//! The type-specific body starts at [`PAGE_HEADER_SIZE`].
//!
//! The `get_u*` accessors are for images of known size (a page, a header
//! whose length was checked); decoders of untrusted bytes check lengths
//! first or read through [`coding::Reader`]. The header accessors
//! ([`page_id`], [`page_lsn`], [`page_type`]) and [`verify_page`] accept any
//! buffer.

pub mod coding;
pub mod compress;

use std::fmt;

use serde::Serialize;

/// Log sequence number: a byte position in the redo stream. Pages carry the
/// LSN of their newest change; 0 means "never changed".
pub type Lsn = u64;

/// Size of the header shared by every page type.
pub const PAGE_HEADER_SIZE: usize = 32;
/// Smallest page size accepted at creation.
pub const MIN_PAGE_SIZE: usize = 4096;
/// Largest page size accepted at creation.
pub const MAX_PAGE_SIZE: usize = 65536;
/// Default page size.
pub const DEFAULT_PAGE_SIZE: usize = 16384;

const OFF_CHECKSUM: usize = 0;
const OFF_SPACE: usize = 4;
const OFF_PAGE_NO: usize = 8;
const OFF_LSN: usize = 12;
const OFF_TYPE: usize = 20;

const _: () = assert!(OFF_TYPE + 2 <= PAGE_HEADER_SIZE);
const _: () = assert!(MIN_PAGE_SIZE.is_power_of_two() && MAX_PAGE_SIZE.is_power_of_two());

/// Identity of a page: tablespace and page number within it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize)]
pub struct PageId {
    /// Tablespace id.
    pub space: u32,
    /// Page number inside the space.
    pub page_no: u32,
}

impl PageId {
    /// A page id.
    pub const fn new(space: u32, page_no: u32) -> Self {
        PageId { space, page_no }
    }
}

impl fmt::Display for PageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.space, self.page_no)
    }
}

/// What a page holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u16)]
pub enum PageType {
    /// Allocated in memory but never initialised (never valid on disk).
    Unused = 0,
    /// Page 0 of a space: allocation state and catalog root.
    SpaceHeader = 1,
    /// B+tree leaf.
    BtreeLeaf = 2,
    /// B+tree internal node.
    BtreeInternal = 3,
    /// A page on the space's free list.
    Free = 4,
    /// A page of undo records (`undo`).
    Undo = 5,
    /// The undo directory: the rollback segments' lists (`undo`).
    UndoDir = 6,
    /// A page of an overflow chain: part of a large value (`lob`).
    Overflow = 7,
    /// The overflow chain directory: chains written and not yet
    /// referenced by a committed row (`lob`).
    LobDir = 8,
}

impl PageType {
    /// Decode a stored type tag.
    pub fn from_u16(v: u16) -> Option<PageType> {
        Some(match v {
            0 => PageType::Unused,
            1 => PageType::SpaceHeader,
            2 => PageType::BtreeLeaf,
            3 => PageType::BtreeInternal,
            4 => PageType::Free,
            5 => PageType::Undo,
            6 => PageType::UndoDir,
            7 => PageType::Overflow,
            8 => PageType::LobDir,
            _ => return None,
        })
    }
}

/// Read a little-endian u16 at `off`.
///
/// # Panics
/// If `b` is shorter than `off + 2` (see the module documentation).
#[inline]
pub fn get_u16(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}
/// Read a little-endian u32 at `off`.
///
/// # Panics
/// If `b` is shorter than `off + 4`.
#[inline]
pub fn get_u32(b: &[u8], off: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[off..off + 4]);
    u32::from_le_bytes(a)
}
/// Read a little-endian u64 at `off`.
///
/// # Panics
/// If `b` is shorter than `off + 8`.
#[inline]
pub fn get_u64(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(a)
}
/// Write a little-endian u16 at `off`.
#[inline]
pub fn put_u16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_le_bytes());
}
/// Write a little-endian u32 at `off`.
#[inline]
pub fn put_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}
/// Write a little-endian u64 at `off`.
#[inline]
pub fn put_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

/// A page image changed a range at a time: whoever owns it learns which
/// bytes a change may touch. A page guard uses this to keep only those
/// bytes as they were, and to diff only around them when the change is
/// logged (`buffer::guard`), instead of copying and diffing the whole
/// page. A plain byte slice is its own `PageBytes`.
pub trait PageBytes {
    /// The whole image.
    fn bytes(&self) -> &[u8];
    /// The bytes of `r`, to change.
    fn range_mut(&mut self, r: std::ops::Range<usize>) -> &mut [u8];
    /// Write a little-endian u16 at `off`.
    #[inline]
    fn set_u16(&mut self, off: usize, v: u16) {
        self.range_mut(off..off + 2)
            .copy_from_slice(&v.to_le_bytes());
    }
    /// Write a little-endian u32 at `off`.
    #[inline]
    fn set_u32(&mut self, off: usize, v: u32) {
        self.range_mut(off..off + 4)
            .copy_from_slice(&v.to_le_bytes());
    }
    /// Write a little-endian u64 at `off`.
    #[inline]
    fn set_u64(&mut self, off: usize, v: u64) {
        self.range_mut(off..off + 8)
            .copy_from_slice(&v.to_le_bytes());
    }
}

/// Plain images (a node being built, a test's page) track nothing.
macro_rules! plain_page_bytes {
    ($($t:ty),*) => {$(
        impl PageBytes for $t {
            #[inline]
            fn bytes(&self) -> &[u8] {
                self
            }
            #[inline]
            fn range_mut(&mut self, r: std::ops::Range<usize>) -> &mut [u8] {
                &mut self[r]
            }
        }
    )*};
}
plain_page_bytes!([u8], Vec<u8>);

/// A header field of `N` bytes at `off`; zeros if `b` is too short, so that
/// the header accessors never panic (such an image fails [`verify_page`]).
fn header_field<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    let mut a = [0u8; N];
    if let Some(s) = b.get(off..off + N) {
        a.copy_from_slice(s);
    }
    a
}

/// The page the header names (zeros for a buffer shorter than the header).
pub fn page_id(b: &[u8]) -> PageId {
    PageId::new(
        u32::from_le_bytes(header_field(b, OFF_SPACE)),
        u32::from_le_bytes(header_field(b, OFF_PAGE_NO)),
    )
}
/// The page LSN stored in the header (0 for a buffer shorter than the header).
pub fn page_lsn(b: &[u8]) -> Lsn {
    u64::from_le_bytes(header_field(b, OFF_LSN))
}
/// The raw page-type tag (0 for a buffer shorter than the header).
pub fn page_type_raw(b: &[u8]) -> u16 {
    u16::from_le_bytes(header_field(b, OFF_TYPE))
}
/// The page type, if the tag is known.
pub fn page_type(b: &[u8]) -> Option<PageType> {
    PageType::from_u16(page_type_raw(b))
}
/// Set the page LSN.
pub fn set_page_lsn(b: &mut [u8], lsn: Lsn) {
    put_u64(b, OFF_LSN, lsn);
}
/// Set the page type.
pub fn set_page_type(b: &mut [u8], t: PageType) {
    put_u16(b, OFF_TYPE, t as u16);
}

/// Zero a page and write a fresh header for `id` of type `t`.
pub fn init_page(b: &mut [u8], id: PageId, t: PageType) {
    b.fill(0);
    put_u32(b, OFF_SPACE, id.space);
    put_u32(b, OFF_PAGE_NO, id.page_no);
    set_page_type(b, t);
}

/// Compute the checksum of a page image (bytes after the checksum field;
/// none for a buffer shorter than the field).
pub fn compute_checksum(b: &[u8]) -> u32 {
    crc32c::crc32c(b.get(OFF_CHECKSUM + 4..).unwrap_or_default())
}

/// Is `len` a page size this format knows (a power of two in
/// [`MIN_PAGE_SIZE`]`..=`[`MAX_PAGE_SIZE`])?
pub const fn is_page_size(len: usize) -> bool {
    len.is_power_of_two() && len >= MIN_PAGE_SIZE && len <= MAX_PAGE_SIZE
}

/// Store the checksum; call just before the page goes to disk.
pub fn stamp_checksum(b: &mut [u8]) {
    let c = compute_checksum(b);
    put_u32(b, OFF_CHECKSUM, c);
}

/// Why a page image read from disk is not acceptable.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PageCheckError {
    /// The buffer is not a page: its length is no page size.
    Size(usize),
    /// Every byte is zero: the page was never written.
    AllZero,
    /// Stored and computed checksums differ.
    Checksum {
        /// Checksum in the header.
        stored: u32,
        /// Checksum of the bytes.
        computed: u32,
    },
    /// The header names another page.
    WrongId(PageId),
    /// Unknown page type tag.
    BadType(u16),
    /// A compressed image ([`compress`]) that does not decode, or one
    /// handed over undecoded.
    Compressed(&'static str),
}

impl fmt::Display for PageCheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PageCheckError::Size(n) => write!(
                f,
                "a {n}-byte buffer is not a page (a power of two in {MIN_PAGE_SIZE}..={MAX_PAGE_SIZE})"
            ),
            PageCheckError::AllZero => write!(f, "page is all zeros (never written)"),
            PageCheckError::Checksum { stored, computed } => write!(
                f,
                "checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"
            ),
            PageCheckError::WrongId(id) => write!(f, "header names page {id}"),
            PageCheckError::BadType(t) => write!(f, "unknown page type {t}"),
            PageCheckError::Compressed(why) => write!(f, "compressed page image: {why}"),
        }
    }
}

/// Verify a page image just read from disk: size, checksum, identity,
/// type. Any buffer may be passed; only a page that passes is `Ok`.
pub fn verify_page(b: &[u8], expect: PageId) -> Result<(), PageCheckError> {
    if !is_page_size(b.len()) {
        return Err(PageCheckError::Size(b.len()));
    }
    if compress::is_compressed(b) {
        return Err(PageCheckError::Compressed("not decoded"));
    }
    let stored = get_u32(b, OFF_CHECKSUM);
    let computed = compute_checksum(b);
    if stored != computed {
        if b.iter().all(|&x| x == 0) {
            return Err(PageCheckError::AllZero);
        }
        return Err(PageCheckError::Checksum { stored, computed });
    }
    let id = page_id(b);
    if id != expect {
        return Err(PageCheckError::WrongId(id));
    }
    let t = page_type_raw(b);
    match PageType::from_u16(t) {
        None | Some(PageType::Unused) => Err(PageCheckError::BadType(t)),
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_checksum() {
        let mut p = vec![0u8; 4096];
        let id = PageId::new(3, 77);
        init_page(&mut p, id, PageType::BtreeLeaf);
        set_page_lsn(&mut p, 0xdead_beef_1234);
        p[100] = 42;
        stamp_checksum(&mut p);
        assert_eq!(verify_page(&p, id), Ok(()));
        assert_eq!(page_id(&p), id);
        assert_eq!(page_lsn(&p), 0xdead_beef_1234);
        assert_eq!(page_type(&p), Some(PageType::BtreeLeaf));
    }

    #[test]
    fn corruption_is_detected() {
        let mut p = vec![0u8; 4096];
        let id = PageId::new(0, 5);
        init_page(&mut p, id, PageType::BtreeInternal);
        stamp_checksum(&mut p);
        for off in [0usize, 3, 4, 12, 31, 32, 2000, 4095] {
            let mut q = p.clone();
            q[off] ^= 0x10;
            assert!(matches!(
                verify_page(&q, id),
                Err(PageCheckError::Checksum { .. })
            ));
        }
        assert_eq!(
            verify_page(&p, PageId::new(0, 6)),
            Err(PageCheckError::WrongId(id))
        );
        let z = vec![0u8; 4096];
        assert_eq!(verify_page(&z, id), Err(PageCheckError::AllZero));
    }

    #[test]
    fn short_or_odd_buffers_are_not_pages() {
        for len in [0usize, 3, 4, 31, 32, 4095, 4097, 6144, 131072] {
            let b = vec![0u8; len];
            assert_eq!(
                verify_page(&b, PageId::new(0, 0)),
                Err(PageCheckError::Size(len))
            );
            // The header accessors read a short buffer as zeros.
            let _ = (
                page_id(&b),
                page_lsn(&b),
                page_type(&b),
                compute_checksum(&b),
            );
        }
        assert_eq!(page_id(&[1, 0, 0, 0, 9]), PageId::new(0, 0));
    }

    use proptest::prelude::*;

    proptest! {
        #[test]
        fn header_accessors_and_verify_never_panic_on_random_bytes(
            b in proptest::collection::vec(any::<u8>(), 0..4200),
            space in any::<u32>(),
            page_no in any::<u32>(),
        ) {
            let _ = (page_id(&b), page_lsn(&b), page_type(&b), compute_checksum(&b));
            let _ = verify_page(&b, PageId::new(space, page_no)).map_err(|e| e.to_string());
        }

        #[test]
        fn a_resealed_mutation_verifies_exactly_when_id_and_type_are_good(
            edits in proptest::collection::vec((4usize..4096, any::<u8>()), 1..8),
        ) {
            let id = PageId::new(0, 7);
            let mut p = vec![0u8; 4096];
            init_page(&mut p, id, PageType::BtreeLeaf);
            for (off, v) in edits {
                p[off] = v;
            }
            stamp_checksum(&mut p);
            let good_type = matches!(page_type(&p), Some(t) if t != PageType::Unused);
            let ok = page_id(&p) == id && good_type;
            prop_assert_eq!(verify_page(&p, id).is_ok(), ok);
        }
    }
}
