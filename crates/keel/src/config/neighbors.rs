//! [`FlushNeighbors`]: the values of `flush_neighbors`, InnoDB's numbers
//! plus `auto`.

use serde::{Deserialize, Serialize};

use crate::flush::neighbors::NeighborMode;

/// What the `flush_neighbors` option says: one of InnoDB's fixed modes
/// (`0`, `1`, `2`: see [`NeighborMode`]), or `auto`, the default, where the
/// flushing policy chooses. `classic` plays InnoDB 8.0, whose default is
/// `0`, so `auto` is `0` there; `steady` writes contiguous runs (`1`) while
/// it measures a device on which one write costs much more than the pages
/// it carries (a disk or volume limited in operations per second), and
/// pages alone (`0`) otherwise (see `flush::policy::steady::merge`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FlushNeighbors {
    /// The policy chooses (the default).
    #[default]
    Auto,
    /// Always this mode.
    Fixed(NeighborMode),
}

impl FlushNeighbors {
    /// The accepted values, for messages.
    pub const SPELLINGS: &'static str =
        "auto (the policy chooses), 0 (none), 1 (contiguous run) or 2 (whole area)";

    /// The mode the option fixes (`None`: `auto`).
    pub fn fixed(self) -> Option<NeighborMode> {
        match self {
            Self::Auto => None,
            Self::Fixed(m) => Some(m),
        }
    }

    /// A one-byte code for atomics: InnoDB's number, or [`Self::AUTO_CODE`].
    pub fn code(self) -> u8 {
        match self {
            Self::Auto => Self::AUTO_CODE,
            Self::Fixed(m) => m.as_option(),
        }
    }

    /// The code of `auto` (see [`FlushNeighbors::code`]).
    pub const AUTO_CODE: u8 = u8::MAX;

    /// Inverse of [`FlushNeighbors::code`]; codes it never returns mean
    /// `auto`.
    pub fn from_code(c: u8) -> Self {
        match c {
            0..=2 => Self::Fixed(NeighborMode::from_option(c)),
            _ => Self::Auto,
        }
    }
}

impl From<NeighborMode> for FlushNeighbors {
    fn from(m: NeighborMode) -> Self {
        Self::Fixed(m)
    }
}

impl std::fmt::Display for FlushNeighbors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Fixed(m) => write!(f, "{}", m.as_option()),
        }
    }
}

impl std::str::FromStr for FlushNeighbors {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "0" => Ok(Self::Fixed(NeighborMode::Off)),
            "1" => Ok(Self::Fixed(NeighborMode::Contiguous)),
            "2" => Ok(Self::Fixed(NeighborMode::Area)),
            _ => Err(format!(
                "`{s}` is not a neighbor mode; expected {}",
                Self::SPELLINGS
            )),
        }
    }
}

/// InnoDB's numbers as integers, `auto` as a string: a file that set
/// `flush_neighbors = 1` reads back the same.
impl Serialize for FlushNeighbors {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Auto => s.serialize_str("auto"),
            Self::Fixed(m) => s.serialize_u8(m.as_option()),
        }
    }
}

impl<'de> Deserialize<'de> for FlushNeighbors {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Visitor)
    }
}

/// A visitor rather than an untagged enum, so that a value of the wrong
/// type is named in the error.
struct Visitor;

impl serde::de::Visitor<'_> for Visitor {
    type Value = FlushNeighbors;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(FlushNeighbors::SPELLINGS)
    }

    fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Self::Value, E> {
        n.to_string().parse().map_err(E::custom)
    }

    fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Self::Value, E> {
        n.to_string().parse().map_err(E::custom)
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Self::Value, E> {
        s.parse().map_err(E::custom)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_value_round_trips_through_text_and_code() {
        for text in ["auto", "0", "1", "2"] {
            let v: FlushNeighbors = text.parse().unwrap();
            assert_eq!(v.to_string(), text);
            assert_eq!(FlushNeighbors::from_code(v.code()), v);
        }
        assert_eq!(FlushNeighbors::default(), FlushNeighbors::Auto);
        assert_eq!(
            "1".parse::<FlushNeighbors>().unwrap().fixed(),
            Some(NeighborMode::Contiguous)
        );
        let e = "3".parse::<FlushNeighbors>().unwrap_err();
        assert!(
            e.starts_with("`3` is not a neighbor mode; expected auto"),
            "{e}"
        );
    }
}
