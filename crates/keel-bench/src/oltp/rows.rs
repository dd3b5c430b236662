//! The sysbench row and its encoding in Keel's trees.

use rand::Rng;

/// Bytes of `c` (sysbench's CHAR(120)).
pub const C_LEN: usize = 120;
/// Bytes of `pad` (sysbench's CHAR(60)).
pub const PAD_LEN: usize = 60;
/// Bytes of an encoded row value: k (4) + c + pad.
pub const ROW_LEN: usize = 4 + C_LEN + PAD_LEN;
/// The secondary index of table `sbtestN` is the tree `sbtestN` + this.
pub const INDEX_SUFFIX: &str = "_k";

/// Name of table number `n` (1-based), as sysbench names it.
pub fn table_name(n: usize) -> String {
    format!("sbtest{n}")
}

/// Name of the tree holding table `n`'s index on `k`.
pub fn index_name(n: usize) -> String {
    format!("sbtest{n}{INDEX_SUFFIX}")
}

/// The primary key of row `id`.
pub fn primary_key(id: u64) -> [u8; 8] {
    id.to_be_bytes()
}

/// The index entry's key for (k, id): sorted by k, then id.
pub fn index_key(k: u32, id: u64) -> [u8; 12] {
    let mut key = [0u8; 12];
    key[..4].copy_from_slice(&k.to_be_bytes());
    key[4..].copy_from_slice(&id.to_be_bytes());
    key
}

/// One row's columns other than `id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The indexed column.
    pub k: u32,
    /// 120 bytes: ten groups of eleven digits joined by `-`, space-padded.
    pub c: [u8; C_LEN],
    /// 60 bytes: five groups of eleven digits joined by `-`, space-padded.
    pub pad: [u8; PAD_LEN],
}

impl Row {
    /// A row with `k` and random `c` and `pad`, generated like sysbench's.
    pub fn random(k: u32, rng: &mut impl Rng) -> Row {
        let mut c = [b' '; C_LEN];
        digit_groups(&mut c, 10, rng);
        let mut pad = [b' '; PAD_LEN];
        digit_groups(&mut pad, 5, rng);
        Row { k, c, pad }
    }

    /// The value stored in the primary tree.
    pub fn encode(&self) -> [u8; ROW_LEN] {
        let mut v = [0u8; ROW_LEN];
        v[..4].copy_from_slice(&self.k.to_le_bytes());
        v[4..4 + C_LEN].copy_from_slice(&self.c);
        v[4 + C_LEN..].copy_from_slice(&self.pad);
        v
    }

    /// Decode a primary-tree value; `None` if it has the wrong length.
    pub fn decode(v: &[u8]) -> Option<Row> {
        if v.len() != ROW_LEN {
            return None;
        }
        Some(Row {
            k: u32::from_le_bytes(v[..4].try_into().ok()?),
            c: v[4..4 + C_LEN].try_into().ok()?,
            pad: v[4 + C_LEN..].try_into().ok()?,
        })
    }
}

/// `k` of an encoded row without decoding the rest.
pub fn row_k(v: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(v.get(..4)?.try_into().ok()?))
}

/// `c` of an encoded row.
pub fn row_c(v: &[u8]) -> Option<&[u8]> {
    v.get(4..4 + C_LEN)
}

/// sysbench's `###########-###########-...`: `groups` groups of 11 random
/// digits joined by `-`, written at the start of `out`.
fn digit_groups(out: &mut [u8], groups: usize, rng: &mut impl Rng) {
    let mut i = 0;
    for g in 0..groups {
        if g > 0 {
            out[i] = b'-';
            i += 1;
        }
        for _ in 0..11 {
            out[i] = b'0' + rng.gen_range(0..10u8);
            i += 1;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn rows_round_trip_and_look_like_sysbench() {
        let r = Row::random(77, &mut SmallRng::seed_from_u64(3));
        let v = r.encode();
        assert_eq!(Row::decode(&v).unwrap(), r);
        assert_eq!(row_k(&v), Some(77));
        let c = std::str::from_utf8(&r.c).unwrap();
        assert_eq!(c.trim_end().len(), 119);
        assert_eq!(c.split('-').count(), 10);
        assert!(c.trim_end().split('-').all(|g| g.len() == 11));
        assert_eq!(std::str::from_utf8(&r.pad).unwrap().trim_end().len(), 59);
        assert!(Row::decode(&v[1..]).is_none());
        assert!(index_key(1, 2) < index_key(2, 1));
        assert_eq!(index_name(3), "sbtest3_k");
    }
}
