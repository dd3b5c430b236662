//! The logical commit record: a transaction's whole write set, written to the
//! redo log as one record at commit and re-applied by recovery when the
//! crash may have come before every op reached its page.
//!
//! Layout (integers fixed-width little-endian):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | transaction id |
//! | 8 | 4 | number of ops `n` |
//! | 12 | … | `n` ops, in (table, key) order |
//!
//! Each op:
//!
//! | size | field |
//! |---|---|
//! | 1 | kind: 1 = put, 2 = delete, 3 = put of an external value |
//! | 4 | table: page number of the tree's root (in the engine's space) |
//! | 2 | key length `k` |
//! | 4 | value length `v` (0 for a delete) |
//! | `k` | key |
//! | `v` | value; for kind 3 the 20-byte `lob::Pointer` to the overflow chain the commit wrote before this record |
//!
//! The record carries no checksum of its own: the log's framing checks it.
//! Decoding still rejects every malformed record (truncated, unknown kind,
//! a delete with a value, trailing bytes, lengths or a root no tree has) so
//! that a framing bug cannot make recovery apply garbage.

use crate::btree::node::{max_key_len, max_value_len};
use crate::error::{Error, Result};
use crate::page::coding::Reader;
use crate::page::MAX_PAGE_SIZE;

/// Bytes before the first op.
pub(crate) const HEADER_SIZE: usize = 12;
/// Bytes of an op before its key.
pub(crate) const OP_HEADER_SIZE: usize = 11;

const KIND_PUT: u8 = 1;
const KIND_DELETE: u8 = 2;
const KIND_PUT_EXTERNAL: u8 = 3;

/// Longest key and value any tree accepts (on the largest pages): a record
/// with a longer one was never written.
const MAX_KEY_LEN: usize = max_key_len(MAX_PAGE_SIZE);
const MAX_VALUE_LEN: usize = max_value_len(MAX_PAGE_SIZE);

// Key and value lengths accepted by the tree always fit the fields.
const _: () = assert!(MAX_KEY_LEN <= u16::MAX as usize);
const _: () = assert!(MAX_VALUE_LEN <= u32::MAX as usize);

/// One change of a write set: `value` is `None` for a delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Op<'a> {
    /// Page number of the table's root.
    pub root: u32,
    pub key: &'a [u8],
    pub value: Option<&'a [u8]>,
    /// `value` is a `lob::Pointer`'s bytes: the value is in an overflow
    /// chain.
    pub external: bool,
}

/// A decoded commit record, borrowing keys and values from its bytes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Record<'a> {
    pub txn_id: u64,
    pub ops: Vec<Op<'a>>,
}

/// Encoded size of `ops`.
pub(crate) fn encoded_len(ops: &[Op<'_>]) -> usize {
    HEADER_SIZE
        + ops
            .iter()
            .map(|op| OP_HEADER_SIZE + op.key.len() + op.value.map_or(0, <[u8]>::len))
            .sum::<usize>()
}

/// Encode a commit record. Keys and values must have passed the tree's
/// size checks (so their lengths fit the fields).
pub(crate) fn encode(txn_id: u64, ops: &[Op<'_>]) -> Vec<u8> {
    let Ok(n) = u32::try_from(ops.len()) else {
        panic!(
            "write set of {} ops does not fit a commit record",
            ops.len()
        );
    };
    let mut out = Vec::with_capacity(encoded_len(ops));
    out.extend_from_slice(&txn_id.to_le_bytes());
    out.extend_from_slice(&n.to_le_bytes());
    for op in ops {
        let (kind, value) = match (op.value, op.external) {
            (Some(v), false) => (KIND_PUT, v),
            (Some(v), true) => (KIND_PUT_EXTERNAL, v),
            (None, _) => (KIND_DELETE, &[][..]),
        };
        assert!(
            op.key.len() <= u16::MAX as usize && value.len() <= u32::MAX as usize,
            "commit record op exceeds the field widths (key {} bytes, value {} bytes)",
            op.key.len(),
            value.len()
        );
        out.push(kind);
        out.extend_from_slice(&op.root.to_le_bytes());
        out.extend_from_slice(&(op.key.len() as u16).to_le_bytes());
        out.extend_from_slice(&(value.len() as u32).to_le_bytes());
        out.extend_from_slice(op.key);
        out.extend_from_slice(value);
    }
    out
}

/// Decode a commit record; any malformation is `Error::Corruption`: a
/// truncated or over-long record, an unknown kind, a delete with a value,
/// page 0 (the space header) as a table root, or a key or value longer
/// than the largest page size allows (no tree could hold it).
pub(crate) fn decode(buf: &[u8]) -> Result<Record<'_>> {
    decode_ops(buf).map_err(|reason| Error::Corruption(format!("commit record: {reason}")))
}

fn decode_ops(buf: &[u8]) -> std::result::Result<Record<'_>, String> {
    let mut r = Reader::new(buf);
    let txn_id = r.u64("transaction id")?;
    let n = r.u32("op count")? as usize;
    // Never trust `n` for an allocation larger than the bytes can hold.
    let mut ops = Vec::with_capacity(n.min(r.remaining() / OP_HEADER_SIZE));
    for i in 0..n {
        let kind = r.u8("op header")?;
        let root = r.u32("op header")?;
        let key_len = usize::from(r.u16("op header")?);
        let value_len = r.u32("op header")? as usize;
        if root == 0 {
            return Err(format!(
                "op {i} names page 0, the space header, as its table"
            ));
        }
        if key_len > MAX_KEY_LEN || value_len > MAX_VALUE_LEN {
            return Err(format!(
                "op {i} has a {key_len}-byte key and a {value_len}-byte value \
                 (at most {MAX_KEY_LEN} and {MAX_VALUE_LEN} on any page size)"
            ));
        }
        let key = r.take(key_len, "key")?;
        let value = match kind {
            KIND_PUT => Some(r.take(value_len, "value")?),
            KIND_PUT_EXTERNAL => {
                let v = r.take(value_len, "value")?;
                if crate::lob::Pointer::from_bytes(v).is_none() {
                    return Err(format!(
                        "op {i} puts an external value without a valid overflow pointer"
                    ));
                }
                Some(v)
            }
            KIND_DELETE if value_len == 0 => None,
            KIND_DELETE => return Err(format!("op {i} is a delete with a {value_len}-byte value")),
            k => return Err(format!("op {i} has unknown kind {k}")),
        };
        ops.push(Op {
            root,
            key,
            value,
            external: kind == KIND_PUT_EXTERNAL,
        });
    }
    if !r.is_empty() {
        return Err(format!("{} trailing bytes after {n} ops", r.remaining()));
    }
    Ok(Record { txn_id, ops })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Vec<Op<'static>> {
        vec![
            Op {
                root: 3,
                key: b"alice",
                value: Some(b"100"),
                external: false,
            },
            Op {
                root: 3,
                key: b"bob",
                value: None,
                external: false,
            },
            Op {
                root: 9,
                key: b"",
                value: Some(b""),
                external: false,
            },
        ]
    }

    #[test]
    fn external_puts_carry_a_pointer_and_nothing_else() {
        let p = crate::lob::Pointer {
            head: 12,
            len: 5 << 20,
            id: 7,
        }
        .to_bytes();
        let ops = [Op {
            root: 3,
            key: b"big",
            value: Some(&p),
            external: true,
        }];
        let buf = encode(9, &ops);
        assert_eq!(buf[HEADER_SIZE], KIND_PUT_EXTERNAL);
        assert_eq!(decode(&buf).unwrap().ops, ops);
        // A kind-3 op whose value is no pointer (a plain value, a zero
        // page) is refused.
        for bad in [&b"not a pointer"[..], &[0u8; crate::lob::POINTER_LEN][..]] {
            let ops = [Op {
                value: Some(bad),
                ..ops[0]
            }];
            let err = decode(&encode(9, &ops)).unwrap_err().to_string();
            assert!(err.contains("overflow pointer"), "{err}");
        }
    }

    #[test]
    fn round_trip() {
        let ops = sample();
        let buf = encode(42, &ops);
        assert_eq!(buf.len(), encoded_len(&ops));
        let r = decode(&buf).unwrap();
        assert_eq!(r.txn_id, 42);
        assert_eq!(r.ops, ops);
        let empty = encode(7, &[]);
        assert_eq!(empty.len(), HEADER_SIZE);
        assert_eq!(decode(&empty).unwrap().ops, vec![]);
    }

    #[test]
    fn exact_bytes() {
        let buf = encode(
            0x0102,
            &[Op {
                root: 5,
                key: b"k",
                value: Some(b"vv"),
                external: false,
            }],
        );
        let want: Vec<u8> = [
            &[2, 1, 0, 0, 0, 0, 0, 0][..],
            &[1, 0, 0, 0],
            &[1],
            &[5, 0, 0, 0],
            &[1, 0],
            &[2, 0, 0, 0],
            b"k",
            b"vv",
        ]
        .concat();
        assert_eq!(buf, want);
    }

    #[test]
    fn every_truncation_is_rejected() {
        let buf = encode(1, &sample());
        for len in 0..buf.len() {
            let e = decode(&buf[..len]).unwrap_err();
            assert!(matches!(e, Error::Corruption(_)), "len {len}: {e}");
        }
    }

    #[test]
    fn trailing_bytes_are_rejected() {
        let mut buf = encode(1, &sample());
        buf.push(0);
        assert!(decode(&buf).unwrap_err().to_string().contains("trailing"));
    }

    #[test]
    fn bad_kind_and_delete_with_value_are_rejected() {
        let mut buf = encode(1, &sample());
        buf[HEADER_SIZE] = 9;
        assert!(decode(&buf).unwrap_err().to_string().contains("kind 9"));
        // Second op (the delete) claims a value.
        let mut buf = encode(1, &sample());
        let op2 = HEADER_SIZE + OP_HEADER_SIZE + 5 + 3;
        assert_eq!(buf[op2], KIND_DELETE);
        buf[op2 + 7] = 1;
        assert!(decode(&buf).unwrap_err().to_string().contains("delete"));
    }

    #[test]
    fn huge_op_count_does_not_allocate_or_panic() {
        let mut buf = encode(1, &[]);
        buf[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&buf).is_err());
    }

    #[test]
    fn random_corruption_never_panics() {
        let buf = encode(77, &sample());
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..5000 {
            let mut b = buf.clone();
            for _ in 0..3 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let i = (x as usize) % b.len();
                b[i] ^= (x >> 32) as u8 | 1;
            }
            if let Ok(r) = decode(&b) {
                // Whatever decodes must re-encode to the same bytes.
                assert_eq!(encode(r.txn_id, &r.ops), b);
            }
        }
    }

    #[test]
    fn impossible_roots_and_lengths_are_rejected() {
        let mut buf = encode(1, &sample());
        buf[HEADER_SIZE + 1..HEADER_SIZE + 5].fill(0);
        assert!(decode(&buf).unwrap_err().to_string().contains("page 0"));
        // One byte past the longest key any page size takes (3072 bytes).
        assert_eq!(MAX_KEY_LEN, 3072);
        let too_long = MAX_KEY_LEN as u16 + 1;
        let mut buf = encode(1, &sample());
        buf[HEADER_SIZE + 5..HEADER_SIZE + 7].copy_from_slice(&too_long.to_le_bytes());
        let err = decode(&buf).unwrap_err().to_string();
        assert!(
            err.contains(&format!("{too_long}-byte key")) && err.contains("at most 3072"),
            "{err}"
        );
        // The longest key itself is a record like any other.
        let key = vec![7u8; MAX_KEY_LEN];
        let ops = [Op {
            root: 3,
            key: &key,
            value: Some(b"v"),
            external: false,
        }];
        let buf = encode(1, &ops);
        assert_eq!(decode(&buf).unwrap().ops, ops);
        let mut buf = encode(1, &sample());
        buf[HEADER_SIZE + 7..HEADER_SIZE + 11].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&buf)
            .unwrap_err()
            .to_string()
            .contains("-byte value"));
    }

    fn op() -> impl Strategy<Value = (u32, Vec<u8>, Option<Vec<u8>>)> {
        (
            1u32..1000,
            proptest::collection::vec(any::<u8>(), 0..20),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
        )
    }

    proptest! {
        #[test]
        fn decode_never_panics_on_random_bytes(b in proptest::collection::vec(any::<u8>(), 0..120)) {
            if let Ok(r) = decode(&b) {
                prop_assert_eq!(encode(r.txn_id, &r.ops), b);
            }
        }

        #[test]
        fn valid_records_round_trip_and_mutations_decode_to_their_bytes(
            txn_id in any::<u64>(),
            ops in proptest::collection::vec(op(), 0..6),
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..5),
        ) {
            let ops: Vec<Op<'_>> = ops
                .iter()
                .map(|(root, k, v)| Op { root: *root, key: k, value: v.as_deref(), external: false })
                .collect();
            let buf = encode(txn_id, &ops);
            let r = decode(&buf).unwrap();
            prop_assert_eq!((r.txn_id, &r.ops), (txn_id, &ops));
            // The log's CRC would pass any of these: the decoder alone decides.
            let mut b = buf.clone();
            for (i, v) in edits {
                let at = i.index(b.len());
                b[at] = v;
            }
            if let Ok(r) = decode(&b) {
                prop_assert_eq!(encode(r.txn_id, &r.ops), b);
            }
        }
    }
}
