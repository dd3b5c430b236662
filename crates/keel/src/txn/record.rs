//! The logical commit record: a transaction's write set, written to the
//! redo log as one record at commit. Its commit number is the record's LSN.
//!
//! Two forms (`docs/format.md`, "Transaction commit payload"):
//! - **with values** (kinds 1 to 3): every op whole. Recovery *re-applies*
//!   such a commit when the crash came before its "applied" marker. Large
//!   values' commits are logged so (the record holds only the overflow
//!   pointer), as are the compensations recovery commits (below).
//! - **keys only** (a put's value left out: kind 4): what most commits log
//!   since 2026-11-30. The values are already in the leaf changes that
//!   follow, so logging them here too cost about a quarter of the redo.
//!   Recovery cannot re-apply such a commit; it *rolls it back* instead,
//!   from the undo records its applied ops left (`commit`'s module doc,
//!   "Rolling back a commit a crash cut short").
//!
//! A record with at least one kind-4 op is keys only; one with none is
//! whole. A record mixing kind 1 and kind 4 is refused (no writer makes
//! one).
//!
//! Layout (integers are unsigned LEB128 varints, `page::coding::put_varint`;
//! until redo format version 2 they were fixed-width, 11 bytes an op more
//! or less where 3 or 4 now do):
//!
//! | size | field |
//! |---|---|
//! | varint | transaction id |
//! | varint | number of ops `n` (≤ 2³² − 1) |
//! | … | `n` ops, in (table, key) order |
//!
//! Each op:
//!
//! | size | field |
//! |---|---|
//! | 1 | kind: 1 = put, 2 = delete, 3 = put of an external value, 4 = put whose value is not logged here |
//! | varint | table: page number of the tree's root (in the engine's space, ≤ 2³² − 1) |
//! | varint | key length `k` |
//! | varint | value length `v` (0 for a delete; absent for kind 4) |
//! | `k` | key |
//! | `v` | value; for kind 3 the 20-byte `lob::Pointer` to the overflow chain the commit wrote before this record |
//!
//! The record carries no checksum of its own: the log's framing checks it.
//! Decoding still rejects every malformed record (truncated, unknown kind,
//! a delete with a value, trailing bytes, lengths or a root no tree has) so
//! that a framing bug cannot make recovery apply garbage.

use crate::btree::node::{max_key_len, max_value_len};
use crate::error::{Error, Result};
use crate::page::coding::{put_varint, varint_len, Reader};
use crate::page::MAX_PAGE_SIZE;

/// Fewest bytes an op takes (kind, root, key length, empty key; kind 4 has
/// no value length).
const MIN_OP_SIZE: usize = 3;

const KIND_PUT: u8 = 1;
const KIND_DELETE: u8 = 2;
const KIND_PUT_EXTERNAL: u8 = 3;
const KIND_PUT_UNLOGGED: u8 = 4;

/// Longest key and value any tree accepts (on the largest pages): a record
/// with a longer one was never written.
const MAX_KEY_LEN: usize = max_key_len(MAX_PAGE_SIZE);
const MAX_VALUE_LEN: usize = max_value_len(MAX_PAGE_SIZE);

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
    /// Every op is whole (no kind 4): recovery may re-apply it. In a
    /// keys-only record a put's `value` is empty: its bytes are not there.
    pub values: bool,
    pub ops: Vec<Op<'a>>,
}

impl Op<'_> {
    /// The op's kind and the value bytes it carries (`None`: no length
    /// field either), with values or keys only.
    fn kind_value(&self, values: bool) -> (u8, Option<&[u8]>) {
        match (self.value, self.external) {
            (Some(v), false) if values => (KIND_PUT, Some(v)),
            (Some(_), false) => (KIND_PUT_UNLOGGED, None),
            (Some(v), true) => (KIND_PUT_EXTERNAL, Some(v)),
            (None, _) => (KIND_DELETE, Some(&[][..])),
        }
    }
}

/// Encoded size of a record of `txn_id` and `ops`, with values or keys
/// only (`values`).
pub(crate) fn encoded_len(txn_id: u64, ops: &[Op<'_>], values: bool) -> usize {
    varint_len(txn_id)
        + varint_len(ops.len() as u64)
        + ops
            .iter()
            .map(|op| {
                let value = op
                    .kind_value(values)
                    .1
                    .map_or(0, |v| varint_len(v.len() as u64) + v.len());
                1 + varint_len(u64::from(op.root))
                    + varint_len(op.key.len() as u64)
                    + op.key.len()
                    + value
            })
            .sum::<usize>()
}

/// Encode a commit record with every value (recovery can re-apply it).
/// Keys and values must have passed the tree's size checks (a longer one
/// is refused by [`decode`]).
pub(crate) fn encode(txn_id: u64, ops: &[Op<'_>]) -> Vec<u8> {
    encode_as(txn_id, ops, true)
}

/// Encode a keys-only commit record: the puts of inline values leave their
/// values out (recovery rolls such a commit back; module doc). A write
/// set of deletes and external puts only comes out whole.
pub(crate) fn encode_keys(txn_id: u64, ops: &[Op<'_>]) -> Vec<u8> {
    encode_as(txn_id, ops, false)
}

fn encode_as(txn_id: u64, ops: &[Op<'_>], values: bool) -> Vec<u8> {
    assert!(
        u32::try_from(ops.len()).is_ok(),
        "write set of {} ops does not fit a commit record",
        ops.len()
    );
    let mut out = Vec::with_capacity(encoded_len(txn_id, ops, values));
    put_varint(&mut out, txn_id);
    put_varint(&mut out, ops.len() as u64);
    for op in ops {
        let (kind, value) = op.kind_value(values);
        out.push(kind);
        put_varint(&mut out, u64::from(op.root));
        put_varint(&mut out, op.key.len() as u64);
        if let Some(v) = value {
            put_varint(&mut out, v.len() as u64);
        }
        out.extend_from_slice(op.key);
        out.extend_from_slice(value.unwrap_or_default());
    }
    out
}

/// Encode `r` back to its bytes (the form it was decoded from).
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn reencode(r: &Record<'_>) -> Vec<u8> {
    encode_as(r.txn_id, &r.ops, r.values)
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
    let txn_id = r.varint(u64::MAX, "transaction id")?;
    let n = r.varint(u64::from(u32::MAX), "op count")? as usize;
    // Never trust `n` for an allocation larger than the bytes can hold.
    let mut ops = Vec::with_capacity(n.min(r.remaining() / MIN_OP_SIZE));
    let (mut saw_put, mut saw_unlogged) = (false, false);
    for i in 0..n {
        let kind = r.u8("op header")?;
        let root = r.varint(u64::from(u32::MAX), "op root")? as u32;
        // Lengths over the limits are refused below, with what they are.
        let key_len = r.varint(u64::from(u32::MAX), "op key length")? as usize;
        let value_len = match kind {
            KIND_PUT_UNLOGGED => 0,
            _ => r.varint(u64::from(u32::MAX), "op value length")? as usize,
        };
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
            KIND_PUT_UNLOGGED => Some(&[][..]),
            KIND_DELETE if value_len == 0 => None,
            KIND_DELETE => return Err(format!("op {i} is a delete with a {value_len}-byte value")),
            k => return Err(format!("op {i} has unknown kind {k}")),
        };
        match kind {
            KIND_PUT => saw_put = true,
            KIND_PUT_UNLOGGED => saw_unlogged = true,
            _ => {}
        }
        if saw_put && saw_unlogged {
            return Err(format!(
                "op {i}: the record mixes puts with and without their values"
            ));
        }
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
    Ok(Record {
        txn_id,
        values: !saw_unlogged,
        ops,
    })
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
        assert_eq!(buf[2], KIND_PUT_EXTERNAL);
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
        assert_eq!(buf.len(), encoded_len(42, &ops, true));
        let r = decode(&buf).unwrap();
        assert_eq!(r.txn_id, 42);
        assert_eq!(r.ops, ops);
        let big = encode(u64::MAX, &ops);
        assert_eq!(big.len(), encoded_len(u64::MAX, &ops, true));
        assert_eq!(decode(&big).unwrap().txn_id, u64::MAX);
        let empty = encode(7, &[]);
        assert_eq!(empty.len(), 2);
        assert_eq!(decode(&empty).unwrap().ops, vec![]);
    }

    #[test]
    fn keys_only_records_leave_inline_values_out() {
        let ops = sample();
        let buf = encode_keys(42, &ops);
        assert_eq!(buf.len(), encoded_len(42, &ops, false));
        // The put of "100" lost its length and its three bytes, the empty
        // put its length: 5 bytes fewer than the whole record.
        assert_eq!(encode(42, &ops).len() - buf.len(), 5);
        let r = decode(&buf).unwrap();
        assert!(!r.values);
        assert_eq!(r.txn_id, 42);
        assert_eq!(r.ops.len(), 3);
        for (got, want) in r.ops.iter().zip(&ops) {
            assert_eq!((got.root, got.key), (want.root, want.key));
            // A put's value is not there; a delete stays a delete.
            assert_eq!(got.value.map(<[u8]>::len), want.value.map(|_| 0));
        }
        assert_eq!(reencode(&r), buf);
        // A whole record decodes as one.
        assert!(decode(&encode(42, &ops)).unwrap().values);
        // Deletes alone need no value: the keys-only form is whole.
        let deletes = [ops[1]];
        assert_eq!(encode_keys(7, &deletes), encode(7, &deletes));
        assert!(decode(&encode_keys(7, &deletes)).unwrap().values);
    }

    #[test]
    fn a_record_mixing_both_forms_is_rejected() {
        let ops = sample();
        // The first op whole (kind 1), the third without its value.
        let mut buf = encode(1, &ops[..1]);
        buf[1] = 2;
        buf.extend_from_slice(&encode_keys(1, &ops[2..])[2..]);
        let err = decode(&buf).unwrap_err().to_string();
        assert!(err.contains("mixes"), "{err}");
    }

    #[test]
    fn every_truncation_of_a_keys_only_record_is_rejected() {
        let buf = encode_keys(1, &sample());
        for len in 0..buf.len() {
            let e = decode(&buf[..len]).unwrap_err();
            assert!(matches!(e, Error::Corruption(_)), "len {len}: {e}");
        }
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
        // Varints: 0x0102 takes two bytes, low seven bits first.
        let want: Vec<u8> = [&[0x82, 0x02][..], &[1], &[1], &[5], &[1], &[2], b"k", b"vv"].concat();
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
        // txn id 1 and 3 ops: one byte each; the first op: kind, root 3,
        // key length 5, value length 3, "alice", "100".
        let mut buf = encode(1, &sample());
        buf[2] = 9;
        assert!(decode(&buf).unwrap_err().to_string().contains("kind 9"));
        // Second op (the delete) claims a value.
        let mut buf = encode(1, &sample());
        let op2 = 2 + 4 + 5 + 3;
        assert_eq!(buf[op2], KIND_DELETE);
        assert_eq!(buf[op2 + 3], 0);
        buf[op2 + 3] = 1;
        assert!(decode(&buf).unwrap_err().to_string().contains("delete"));
    }

    #[test]
    fn huge_op_count_does_not_allocate_or_panic() {
        let mut buf = vec![1];
        put_varint(&mut buf, u64::from(u32::MAX));
        assert!(decode(&buf).is_err());
        let mut buf = vec![1];
        put_varint(&mut buf, u64::from(u32::MAX) + 1);
        assert!(decode(&buf).unwrap_err().to_string().contains("op count"));
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
                assert_eq!(reencode(&r), b);
            }
        }
    }

    #[test]
    fn impossible_roots_and_lengths_are_rejected() {
        let mut buf = encode(1, &sample());
        buf[3] = 0;
        assert!(decode(&buf).unwrap_err().to_string().contains("page 0"));
        // One byte past the longest key any page size takes (3072 bytes),
        // in a record written by hand.
        assert_eq!(MAX_KEY_LEN, 3072);
        let too_long = MAX_KEY_LEN + 1;
        let hand = |key_len: u64, value_len: u64| {
            let mut b = vec![1, 1, KIND_PUT, 3];
            put_varint(&mut b, key_len);
            put_varint(&mut b, value_len);
            b
        };
        let buf = hand(too_long as u64, 1);
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
        let buf = hand(1, u64::from(u32::MAX));
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
                prop_assert_eq!(reencode(&r), b);
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
            let keys = encode_keys(txn_id, &ops);
            prop_assert_eq!(keys.len(), encoded_len(txn_id, &ops, false));
            let k = decode(&keys).unwrap();
            prop_assert_eq!(k.values, !ops.iter().any(|op| op.value.is_some()));
            prop_assert_eq!(reencode(&k), keys);
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
                prop_assert_eq!(reencode(&r), b);
            }
        }
    }
}
