//! Sizes in bytes as the options take them in text: `4096`, `128MiB`.

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
