//! The two shapes every on-disk structure outside the pages takes, in one
//! place so that each codec is only its field table:
//!
//! - [`Seal`]: a *sealed header*: an optional magic at offset 0, an optional
//!   `u32` format version right after it, fixed-width little-endian fields,
//!   then a CRC32C of every byte before the CRC. The data-file header, the
//!   redo log file header and checkpoint slots and the doublewrite file and
//!   area headers are sealed headers.
//! - [`Reader`]: a bounds-checked cursor for variable-length records (redo
//!   page records, commit records): every read says what it wanted and where
//!   when the bytes run out, instead of panicking.
//!
//! Nothing here knows which structure it serves: the callers name
//! themselves in [`Seal::what`] and [`Seal::kind`].

use super::{get_u32, put_u32};

/// Bytes of the CRC32C that ends a sealed header.
pub const CRC_LEN: usize = 4;
/// Bytes of the format version of a sealed header.
pub const VERSION_LEN: usize = 4;

/// The frame of one kind of sealed header. A header with its CRC at byte
/// `crc_at` occupies `[0, crc_at + 4)`; the CRC covers `[0, crc_at)`, magic
/// and version included, so a header is checked as one unit.
#[derive(Clone, Copy, Debug)]
pub struct Seal {
    /// What the bytes are, for messages: "data file header".
    pub what: &'static str,
    /// What a block with another magic is not, for messages: "Keel data file".
    pub kind: &'static str,
    /// Magic at offset 0; empty for a header without one (a checkpoint slot).
    pub magic: &'static [u8],
    /// Format version stored right after the magic; `None` for none.
    pub version: Option<u32>,
}

impl Seal {
    /// Offset of the first field after the magic and version.
    pub const fn body_at(&self) -> usize {
        self.magic.len()
            + match self.version {
                Some(_) => VERSION_LEN,
                None => 0,
            }
    }

    /// Write a header into `b[..crc_at + 4]`: zero it, write the magic and
    /// version, let `fields` fill in the rest, then store the CRC.
    ///
    /// # Panics
    /// If `b` is shorter than `crc_at + 4` or `crc_at` does not leave room
    /// for the magic and version: the caller's layout is wrong.
    pub fn seal(&self, b: &mut [u8], crc_at: usize, fields: impl FnOnce(&mut [u8])) {
        assert!(
            crc_at >= self.body_at() && b.len() >= crc_at + CRC_LEN,
            "{}: a {}-byte buffer cannot hold a header with its CRC at byte {crc_at}",
            self.what,
            b.len()
        );
        let h = &mut b[..crc_at + CRC_LEN];
        h.fill(0);
        h[..self.magic.len()].copy_from_slice(self.magic);
        if let Some(v) = self.version {
            put_u32(h, self.magic.len(), v);
        }
        fields(h);
        let crc = crc32c::crc32c(&h[..crc_at]);
        put_u32(h, crc_at, crc);
    }

    /// Is `b` a header of this kind at all (its magic)? Checked before the
    /// CRC so that a foreign file is reported as such, not as corrupt.
    pub fn check_magic(&self, b: &[u8]) -> Result<(), String> {
        match b.get(..self.magic.len()) {
            Some(m) if m == self.magic => Ok(()),
            _ => Err(format!("not a {} (bad magic)", self.kind)),
        }
    }

    /// Check a header whose CRC is at `crc_at`: length, magic, CRC, then
    /// version (a version is only believed once the CRC vouches for it).
    /// On success `b[..crc_at + 4]` may be read with the `get_u*` accessors.
    pub fn open(&self, b: &[u8], crc_at: usize) -> Result<(), String> {
        let Some(len) = crc_at
            .checked_add(CRC_LEN)
            .filter(|_| crc_at >= self.body_at())
        else {
            return Err(format!("{}: no room for a CRC at byte {crc_at}", self.what));
        };
        if b.len() < len {
            return Err(format!(
                "{} is {} bytes, expected at least {len}",
                self.what,
                b.len()
            ));
        }
        self.check_magic(b)?;
        let stored = get_u32(b, crc_at);
        let computed = crc32c::crc32c(&b[..crc_at]);
        if stored != computed {
            return Err(format!(
                "{} checksum mismatch (stored {stored:#010x}, computed {computed:#010x})",
                self.what
            ));
        }
        if let Some(want) = self.version {
            let v = get_u32(b, self.magic.len());
            if v != want {
                return Err(format!(
                    "{} format version {v}, this build reads version {want}",
                    self.what
                ));
            }
        }
        Ok(())
    }
}

/// A bounds-checked little-endian cursor over untrusted bytes. Every read
/// that would run past the end is an error naming the read and the offset;
/// nothing is consumed by a failed read.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A cursor at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Whether every byte was consumed.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The next `n` bytes; `what` names them in the error.
    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let Some(end) = end else {
            return Err(format!(
                "truncated {what}: {n} bytes wanted at offset {} of {}",
                self.pos,
                self.buf.len()
            ));
        };
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], String> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }

    /// A byte.
    pub fn u8(&mut self, what: &str) -> Result<u8, String> {
        Ok(self.array::<1>(what)?[0])
    }

    /// An unsigned LEB128 varint ([`put_varint`]) of at most `max`: seven
    /// bits a byte, low first, the high bit set on every byte but the
    /// last. Refused: a truncated one, one longer than a u64 takes, a
    /// value over `max`, and one with a needless zero byte at the end (so
    /// that every value has one encoding).
    pub fn varint(&mut self, max: u64, what: &str) -> Result<u64, String> {
        let at = self.pos;
        let mut v = 0u64;
        for i in 0..MAX_VARINT {
            let b = self.u8(what)?;
            let bits = u64::from(b & 0x7f);
            if i == MAX_VARINT - 1 && bits > 1 {
                break;
            }
            v |= bits << (7 * i);
            if b & 0x80 == 0 {
                if i > 0 && b == 0 {
                    break;
                }
                if v > max {
                    return Err(format!("{what} at offset {at}: {v} is over {max}"));
                }
                return Ok(v);
            }
        }
        Err(format!("{what} at offset {at}: not a valid varint"))
    }
}

/// Most bytes a varint takes (a u64).
pub const MAX_VARINT: usize = 10;

/// Append `v` as an unsigned LEB128 varint: 1 byte under 128, 2 under
/// 16,384, 3 under 2,097,152.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Bytes [`put_varint`] takes for `v`.
pub const fn varint_len(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// A signed value folded onto the unsigned ones, small magnitudes small
/// (0, -1, 1, -2 … → 0, 1, 2, 3 …), for [`put_varint`].
pub const fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The inverse of [`zigzag`].
pub const fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::page::get_u64;
    use proptest::prelude::*;

    const TEST: Seal = Seal {
        what: "test header",
        kind: "test file",
        magic: b"KEELTEST",
        version: Some(3),
    };
    const BARE: Seal = Seal {
        what: "bare slot",
        kind: "bare slot",
        magic: b"",
        version: None,
    };

    proptest! {
        #[test]
        fn varints_round_trip_and_every_value_has_one_encoding(v in any::<u64>(), s in any::<i64>(), junk in proptest::collection::vec(any::<u8>(), 0..12)) {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            prop_assert_eq!(b.len(), varint_len(v));
            let mut r = Reader::new(&b);
            prop_assert_eq!(r.varint(u64::MAX, "v").unwrap(), v);
            prop_assert!(r.is_empty());
            prop_assert_eq!(unzigzag(zigzag(s)), s);
            // Any bytes: a value decoded is encoded back to the same bytes.
            let mut r = Reader::new(&junk);
            if let Ok(x) = r.varint(u64::MAX, "junk") {
                let mut again = Vec::new();
                put_varint(&mut again, x);
                prop_assert_eq!(&again[..], &junk[..r.pos()]);
            }
        }
    }

    #[test]
    fn varints_refuse_truncation_overflow_padding_and_values_over_the_limit() {
        let bad: [&[u8]; 4] = [
            &[0x80],
            &[0xff; 10],
            &[0x80, 0x00],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02],
        ];
        for b in bad {
            assert!(Reader::new(b).varint(u64::MAX, "x").is_err(), "{b:?}");
        }
        let mut b = Vec::new();
        put_varint(&mut b, 300);
        assert!(Reader::new(&b)
            .varint(299, "x")
            .unwrap_err()
            .contains("over 299"));
        assert_eq!(Reader::new(&b).varint(300, "x").unwrap(), 300);
        assert_eq!(varint_len(0), 1);
        assert_eq!(varint_len(127), 1);
        assert_eq!(varint_len(128), 2);
        assert_eq!(varint_len(u64::MAX), 10);
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
    }

    #[test]
    fn sealed_bytes_are_magic_version_fields_crc() {
        let mut b = [0xffu8; 32];
        TEST.seal(&mut b, 20, |h| crate::page::put_u64(h, 12, 0x0102));
        assert_eq!(&b[..8], b"KEELTEST");
        assert_eq!(get_u32(&b, 8), 3);
        assert_eq!(get_u64(&b, 12), 0x0102);
        assert_eq!(get_u32(&b, 20), crc32c::crc32c(&b[..20]));
        assert_eq!(&b[24..], &[0xff; 8], "bytes past the CRC are left alone");
        TEST.open(&b, 20).unwrap();
    }

    #[test]
    fn open_says_what_is_wrong_in_order() {
        let mut b = [0u8; 24];
        TEST.seal(&mut b, 20, |_| {});
        let err = |b: &[u8]| TEST.open(b, 20).unwrap_err();
        assert!(err(&b[..23]).contains("23 bytes, expected at least 24"));
        assert!(err(&[0u8; 24]).contains("not a test file (bad magic)"));
        let mut c = b;
        c[15] ^= 1;
        assert!(err(&c).contains("test header checksum mismatch"));
        let mut v = b;
        crate::page::put_u32(&mut v, 8, 4);
        let crc = crc32c::crc32c(&v[..20]);
        crate::page::put_u32(&mut v, 20, crc);
        assert!(err(&v).contains("format version 4, this build reads version 3"));
        assert!(TEST.open(&b, 4).unwrap_err().contains("no room"));
        assert!(TEST.open(&b, usize::MAX).is_err());
    }

    #[test]
    fn a_seal_without_magic_or_version_is_only_a_crc() {
        let mut b = [0u8; 20];
        BARE.seal(&mut b, 16, |h| crate::page::put_u64(h, 0, 7));
        assert_eq!(BARE.body_at(), 0);
        BARE.open(&b, 16).unwrap();
        b[0] = 8;
        assert!(BARE.open(&b, 16).unwrap_err().contains("checksum"));
    }

    #[test]
    fn reader_reports_truncation_without_consuming() {
        let mut r = Reader::new(&[1, 0x80, 2]);
        assert_eq!(r.u8("a").unwrap(), 1);
        assert!(r.take(3, "b").unwrap_err().contains("truncated b"));
        assert_eq!(r.pos(), 1);
        assert_eq!(r.varint(u64::MAX, "c").unwrap(), 256);
        assert!(r.is_empty());
        assert!(r.take(usize::MAX, "d").is_err());
    }

    proptest! {
        #[test]
        fn open_never_panics_on_random_bytes(
            b in proptest::collection::vec(any::<u8>(), 0..64),
            crc_at in 0usize..80,
        ) {
            let _ = TEST.open(&b, crc_at);
            let _ = BARE.open(&b, crc_at);
        }

        #[test]
        fn what_is_sealed_opens(fields in proptest::collection::vec(any::<u8>(), 0..40)) {
            let crc_at = TEST.body_at() + fields.len();
            let mut b = vec![0u8; crc_at + CRC_LEN];
            TEST.seal(&mut b, crc_at, |h| h[TEST.body_at()..crc_at].copy_from_slice(&fields));
            prop_assert!(TEST.open(&b, crc_at).is_ok());
            prop_assert_eq!(&b[TEST.body_at()..crc_at], &fields[..]);
        }
    }
}
