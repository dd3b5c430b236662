//! Commit: log the write set as one record, apply it to the trees, wait for
//! durability. Also the one-operation commits behind `Table::put` and
//! `Table::delete`, and finishing the commits recovery found unapplied.
//!
//! # Applying a logged commit cannot fail for a passing reason
//!
//! Once its record is logged, a commit is decided: it must reach every
//! page, or the engine must refuse writes until recovery finishes it. So an
//! operation that fails for a reason that passes — no free frame, a full
//! disk (ENOSPC) while a page is written to make room, page writes that
//! fail and are held for retry (`Error::WriteBackFailing`), a log-space
//! wait that ended — is retried, holding nothing (its row locks aside), with a pause
//! that grows to a second, for up to [`APPLY_RETRY_LIMIT`], logging why
//! every ten seconds. Operations are idempotent and change nothing when
//! they fail, so a retry is safe. Anything else (a corrupt page, a failed
//! read, a poisoned engine), or the time limit, or a close that gives up on
//! commits in flight, ends the commit with the error and poisons the
//! engine (see `engine::commit`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::btree::node::{check_entry, max_key_len};
use crate::btree::BTree;
use crate::engine::admission::Budget;
use crate::engine::commit::CommitTicket;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::page::{Lsn, PageId};

use super::record::{self, Op};

/// How long an operation of a logged commit is retried before the engine
/// gives up on it (module doc).
pub(crate) const APPLY_RETRY_LIMIT: Duration = Duration::from_secs(600);

/// Log `ops` (sorted by table and key) as the commit record of `txn_id`,
/// apply them in that order and wait until the record is as durable as
/// `flush_log_at_trx_commit` asks. The caller holds the row lock of every
/// op. Returns, per op, whether its key was present before.
pub(super) fn log_and_apply(e: &Engine, txn_id: u64, ops: &[Op<'_>]) -> Result<Vec<bool>> {
    let started = Instant::now();
    let rec: Arc<[u8]> = record::encode(txn_id, ops).into();
    let ticket = e.begin_commit(rec)?;
    let found = apply_all(e, &ticket, ops)?;
    let lsn = ticket.finish()?;
    e.wait_durable(lsn)?;
    let us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    e.metrics.trx_commit_latency.record(us);
    Ok(found)
}

fn apply_all(e: &Engine, ticket: &CommitTicket<'_>, ops: &[Op<'_>]) -> Result<Vec<bool>> {
    let mut found = Vec::with_capacity(ops.len());
    for op in ops {
        let budget = ticket.op_budget();
        found.push(apply_with_retry(e, &budget, ticket.lsn, op)?);
    }
    Ok(found)
}

fn apply_with_retry(e: &Engine, budget: &Budget<'_>, commit: Lsn, op: &Op<'_>) -> Result<bool> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(1);
    let mut last_report = started;
    loop {
        let err = match apply_op(e, budget, op) {
            Ok(found) => return Ok(found),
            Err(err) => err,
        };
        let passing = is_passing(&err);
        // A retry cannot help once writes are refused, or closing gave up.
        let refused = e
            .adm
            .check_writable(crate::engine::admission::Purpose::InFlight);
        if !passing
            || refused.is_err()
            || e.adm.abandoned()
            || started.elapsed() > APPLY_RETRY_LIMIT
        {
            return Err(err);
        }
        Metrics::add(&e.metrics.trx_apply_retries, 1);
        if last_report.elapsed() >= Duration::from_secs(10) || last_report == started {
            last_report = Instant::now();
            log::warn!(
                "commit at LSN {commit} is logged but applying it failed ({err}); retrying                  for up to {APPLY_RETRY_LIMIT:?} (waited {:?} so far)",
                started.elapsed()
            );
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

/// Errors a retry may outlive: a full disk (space can be freed), page
/// writes held for retry (the device may take them again: nothing was
/// lost), no free frame, a wait for log space that ended without a device
/// error. A failed read, write-back failing for good, a corrupt page, a
/// poisoned engine do not pass.
fn is_passing(err: &Error) -> bool {
    err.may_pass() || matches!(err, Error::BufferPoolExhausted(_) | Error::LogOverloaded(_))
}

fn apply_op(e: &Engine, budget: &Budget<'_>, op: &Op<'_>) -> Result<bool> {
    let tree = BTree::open(PageId::new(e.space_id(), op.root));
    match op.value {
        Some(v) => tree.put_in(e, budget, op.key, v),
        None => tree.delete_in(e, budget, op.key),
    }
}

/// Finish a commit recovery found logged at `lsn` but not applied: enter it
/// in flight again and apply its record. Idempotent (puts and deletes are),
/// so it may have been partly or wholly applied before the crash. Returns
/// the number of ops.
pub(crate) fn finish_unapplied(e: &Engine, lsn: Lsn, rec: Arc<[u8]>) -> Result<usize> {
    let r = record::decode(&rec)?;
    let ticket = e.resume_commit(lsn, rec.clone())?;
    apply_all(e, &ticket, &r.ops)?;
    ticket.finish()?;
    Ok(r.ops.len())
}

/// `Table::put` (`value` given) and `Table::delete` as a one-operation
/// transaction: take the row lock (waiting behind a transaction that holds
/// it), log, apply, wait for durability, release. Returns whether the key
/// was present before.
pub(crate) fn autocommit(
    sys: &super::TrxSys,
    tree: BTree,
    table: &str,
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<bool> {
    let e = &*sys.engine;
    match value {
        Some(v) => check_entry(e.page_size(), key, v)?,
        // Such a key cannot be stored, so it is not there to delete.
        None if key.len() > max_key_len(e.page_size()) => return Ok(false),
        None => {}
    }
    e.pace_writer()?;
    let id = sys.next_id();
    let lk = (tree.root().page_no, key.to_vec());
    sys.locks.note_thread(id, std::thread::current().id());
    if let Err(err) = sys.lock(e, id, &lk, table) {
        sys.locks.release(id, []);
        return Err(err);
    }
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
