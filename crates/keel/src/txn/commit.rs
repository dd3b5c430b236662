//! Commit: log the write set as one record, apply it to the trees, wait for
//! durability. Also the one-operation commits behind `Table::put` and
//! `Table::delete`, and the re-application that recovery uses.

use crate::btree::node::{check_entry, max_key_len};
use crate::btree::BTree;
use crate::db::Table;
use crate::engine::Engine;
use crate::error::Result;
use crate::metrics::Metrics;
use crate::page::PageId;

use super::record::{self, Op};

/// Log `ops` (sorted by table and key) as the commit record of `txn_id`,
/// apply them in that order and wait until the record is as durable as
/// `flush_log_at_trx_commit` asks. The caller holds the row lock of every
/// op. Returns, per op, whether its key was present before.
///
/// If applying fails after the record was logged, the ticket is dropped
/// unfinished, so the checkpoint never passes the record and recovery
/// re-applies it: the commit is decided by the log, not by the trees.
pub(super) fn log_and_apply(e: &Engine, txn_id: u64, ops: &[Op<'_>]) -> Result<Vec<bool>> {
    let rec = record::encode(txn_id, ops);
    let ticket = e.begin_commit(&rec)?;
    let mut found = Vec::with_capacity(ops.len());
    for op in ops {
        found.push(apply_op(e, op)?);
    }
    let lsn = ticket.finish()?;
    e.wait_durable(lsn)?;
    Ok(found)
}

fn apply_op(e: &Engine, op: &Op<'_>) -> Result<bool> {
    let tree = BTree::open(PageId::new(e.space_id(), op.root));
    match op.value {
        Some(v) => tree.put(e, op.key, v),
        None => tree.delete(e, op.key),
    }
}

/// Decode a commit record and apply every op to its tree; returns the
/// number of ops. Idempotent (puts and deletes are), so recovery may call
/// it for a commit whose application was partly or wholly done before the
/// crash. A malformed record applies nothing.
pub(crate) fn apply_record(e: &Engine, rec: &[u8]) -> Result<usize> {
    let r = record::decode(rec)?;
    for op in &r.ops {
        apply_op(e, op)?;
    }
    Ok(r.ops.len())
}

/// `Table::put` (`value` given) and `Table::delete` as a one-operation
/// transaction: take the row lock (waiting behind a transaction that holds
/// it), log, apply, wait for durability, release. Returns whether the key
/// was present before.
pub(crate) fn autocommit(t: &Table, key: &[u8], value: Option<&[u8]>) -> Result<bool> {
    let inner = &*t.inner;
    let e = &*inner.engine;
    match value {
        Some(v) => check_entry(e.page_size(), key, v)?,
        // Such a key cannot be stored, so it is not there to delete.
        None if key.len() > max_key_len(e.page_size()) => return Ok(false),
        None => {}
    }
    let sys = &inner.trx_sys;
    let id = sys.next_id();
    let lk = (t.tree.root().page_no, key.to_vec());
    sys.lock(e, id, &lk, t.name())?;
    let ops = [Op {
        root: lk.0,
        key,
        value,
    }];
    let r = log_and_apply(e, id, &ops);
    sys.locks.release(id, [&lk]);
    let found = r?;
    Metrics::add(&e.metrics.trx_commits, 1);
    Ok(found.first().copied().unwrap_or(false))
}
