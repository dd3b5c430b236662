//! Sizes in bytes: [`ByteSize`] for options set from Rust, and the text
//! form (`128MiB`) that files and the command line use.

use std::fmt;
use std::str::FromStr;

/// A number of bytes, for the options that are sizes (`page_size`,
/// `buffer_pool_size`, `log_file_size`): `ByteSize::mib(64)` says its unit
/// where a bare `67108864` would not. The constructors saturate at
/// `u64::MAX` rather than wrap, so an absurd size is refused by validation
/// instead of becoming a small one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(u64);

impl ByteSize {
    /// `n` bytes.
    pub const fn bytes(n: u64) -> Self {
        ByteSize(n)
    }

    /// `n` KiB (1024 bytes each).
    pub const fn kib(n: u64) -> Self {
        ByteSize(n.saturating_mul(1 << 10))
    }

    /// `n` MiB.
    pub const fn mib(n: u64) -> Self {
        ByteSize(n.saturating_mul(1 << 20))
    }

    /// `n` GiB.
    pub const fn gib(n: u64) -> Self {
        ByteSize(n.saturating_mul(1 << 30))
    }

    /// The number of bytes.
    pub const fn as_u64(self) -> u64 {
        self.0
    }
}

impl From<ByteSize> for u64 {
    fn from(size: ByteSize) -> u64 {
        size.0
    }
}

/// The largest unit that divides the size exactly: `64MiB`, `1GiB`,
/// `12345` (bytes); [`FromStr`] reads it back.
impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 4] = [
            (1 << 40, "TiB"),
            (1 << 30, "GiB"),
            (1 << 20, "MiB"),
            (1 << 10, "KiB"),
        ];
        let n = self.0;
        let exact = UNITS
            .iter()
            .find(|(unit, _)| n != 0 && n.is_multiple_of(*unit));
        match exact {
            Some((unit, name)) => write!(f, "{}{name}", n / unit),
            None => write!(f, "{n}"),
        }
    }
}

/// As the options take sizes in text: `4096`, `16k`, `128MiB`, `1.5GiB`.
impl FromStr for ByteSize {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        parse_size(s).map(ByteSize)
    }
}

/// Parse a byte size: a plain number or a number with a unit
/// (K/KB/KiB, M/MB/MiB, G/GB/GiB, T; all binary multiples, as in InnoDB).
pub(crate) fn parse_size(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("`{s}` is not a size"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        u => return Err(format!("unknown size unit `{u}` in `{s}`")),
    };
    Ok((n * mult as f64).round() as u64)
}

/// Serde for the size options: a number of bytes, or a string with a
/// unit. A visitor rather than an untagged enum, so that a value of the
/// wrong type is named in the error ("invalid type: boolean `true`,
/// expected a size ...") instead of "data did not match any variant".
pub(super) mod size_serde {
    use std::fmt;

    use serde::de::{self, Unexpected, Visitor};
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(*v)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        d.deserialize_any(SizeVisitor)
    }

    struct SizeVisitor;

    impl Visitor<'_> for SizeVisitor {
        type Value = u64;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a size: a number of bytes, or one with a unit such as \"128MiB\"")
        }

        fn visit_u64<E: de::Error>(self, n: u64) -> Result<u64, E> {
            Ok(n)
        }

        fn visit_i64<E: de::Error>(self, n: i64) -> Result<u64, E> {
            u64::try_from(n).map_err(|_| E::invalid_value(Unexpected::Signed(n), &self))
        }

        fn visit_str<E: de::Error>(self, s: &str) -> Result<u64, E> {
            super::parse_size(s).map_err(E::custom)
        }
    }
}

/// [`size_serde`] for a `usize` option (`page_size`).
pub(super) mod usize_size_serde {
    use serde::{de, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &usize, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(*v as u64)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
        let n = super::size_serde::deserialize(d)?;
        usize::try_from(n).map_err(|_| {
            de::Error::invalid_value(
                de::Unexpected::Unsigned(n),
                &"a size that fits this machine",
            )
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn constructors_say_their_unit_and_saturate() {
        assert_eq!(ByteSize::bytes(4096).as_u64(), 4096);
        assert_eq!(ByteSize::kib(16).as_u64(), 16 << 10);
        assert_eq!(ByteSize::mib(64).as_u64(), 64 << 20);
        assert_eq!(u64::from(ByteSize::gib(3)), 3 << 30);
        assert_eq!(ByteSize::gib(u64::MAX).as_u64(), u64::MAX);
    }

    #[test]
    fn printed_in_the_largest_exact_unit_and_read_back() {
        for (size, text) in [
            (ByteSize::gib(1), "1GiB"),
            (ByteSize::mib(1536), "1536MiB"),
            (ByteSize::kib(16), "16KiB"),
            (ByteSize::bytes(12345), "12345"),
            (ByteSize::bytes(0), "0"),
            (ByteSize::gib(2048), "2TiB"),
        ] {
            assert_eq!(size.to_string(), text);
            assert_eq!(text.parse::<ByteSize>().unwrap(), size, "{text}");
        }
        let e = "12 parsecs".parse::<ByteSize>().unwrap_err();
        assert!(e.contains("parsecs"), "{e}");
    }
}
