//! Commit: log the write set as one record, apply it to the trees, wait for
//! durability. Also the one-operation commits behind `Table::put` and
//! `Table::delete`, and finishing the commits recovery found unapplied:
//! re-applying those logged whole, rolling back those logged keys only.
//!
//! # Large values
//!
//! Before the record is logged, the values too long for a leaf are
//! written to overflow chains (one bundle for the commit, entered in the
//! overflow directory), and the record's op carries the chain's pointer
//! (kind 3). Once every op is applied, and before the "applied" marker,
//! the bundle's directory slot is cleared: recovery, which applies again a
//! commit whose marker is not durable, clears it too, and the open frees
//! the bundles of commits whose record never reached the log (`lob`'s
//! module doc).
//!
//! # Applying the operations, with their undo
//!
//! The committer holds the row lock of every op, so no other commit
//! changes those rows while it applies; only purge may remove a delete
//! mark under it, which it does only for a mark every view sees as
//! "deleted" (so the version the committer keeps in undo reads the same
//! either way). The apply has three steps:
//! 1. read each op's row (its latest version) and decide what its undo
//!    record keeps: the old version, or a delta of it;
//! 2. append every undo record of the commit in one call
//!    (`UndoSpace::append_all`): one mini-transaction per undo page they
//!    fill, most often one for the whole commit, so the records are in
//!    the log before any row that points to them;
//! 3. write each new version, or delete mark, stamped with the commit
//!    number and pointing to its undo record (a mini-transaction each).
//!
//! A crash between steps 2 and 3, or within 3, leaves undo records nobody
//! points to, which purge drops like any other; recovery reads the rows
//! again and appends records for those not yet written. An insert keeps
//! no undo: its version points to nothing, meaning "absent before".
//! Deleting a row that is absent or already delete-marked changes
//! nothing.
//!
//! One call for all the records rather than one mini-transaction per op
//! saves, per record, a group header, a page record header and a byte
//! range in the redo: on the OLTP `read_write` workload (about 5 records
//! a transaction) 2,450 bytes of redo a transaction became 2,295, and
//! the pages written in memory fell with it (2026-11-29).
//!
//! The commit is visible to new read views only when its last op is in
//! place: it stays in the log's set of commits in flight until
//! `CommitTicket::finish` (`view`'s module doc).
//!
//! # Rolling back a commit a crash cut short
//!
//! Most commits log their record **keys only** (`record`'s module doc): the
//! values are in the leaf changes that follow, and logging them twice cost
//! about a quarter of the redo. A commit is then decided by its "applied"
//! marker, not by its record, and no durable commit can have depended on
//! one whose marker is not durable:
//! - it is acknowledged only once its marker is durable (at
//!   `flush_log_at_trx_commit = 1`; at 0 and 2 a crash may lose the last
//!   commits anyway, whole);
//! - other transactions see it only from its marker on: it stays among
//!   the log's commits in flight until then, and holds its row locks, so
//!   a commit that read or wrote its rows lies after its marker in the
//!   log, and is durable only if the marker is. (A reader may see it
//!   before the marker is durable, as it always could see a commit before
//!   its record was: visibility comes before durability, as in InnoDB's
//!   group commit.)
//!
//! So recovery rolls such a commit back (`roll_back_unfinished`): every
//! row that carries its version goes back to the version before, rebuilt
//! from the undo record the row points to (`read::before`), as a reader
//! whose view misses the commit would see it; an insert's row is
//! delete-marked. It does so with one **compensating commit**, logged
//! whole and applied like any other, and only then appends the rolled back
//! commit's marker. The compensation's undo records hold the rolled back
//! versions, and those hold the versions before them, exactly as if the
//! commit had finished and another had undone it: purge frees every
//! overflow chain once, when the version owning it goes (a copy of a
//! restored large value gets a chain of its own). A row the commit never
//! reached may still have an undo record of it, appended before the crash
//! (the records go in before any row): if that row's value is large, the
//! compensation writes it again in a chain of its own, since purge will
//! free the chain the record names.
//!
//! A crash during the rollback: before the compensation's record, the
//! next open starts over; after it, the compensation is a whole record
//! that the next open re-applies first, then it finds no row carrying the
//! rolled back commit (it may copy a large value of a row the commit never
//! reached once more) and appends its marker
//! (`redo::recovery::trust_tests`). Commits recovery hands up unfinished
//! held their row locks until the crash, so no two of them share a row.
//!
//! A write set with a large value is logged whole (its record holds only
//! the chain's pointer, so that costs nothing) and re-applied as before.
//!
//! # Applying a logged commit cannot fail for a passing reason
//!
//! Once its record is logged, a commit must reach every page, or the
//! engine must refuse writes until recovery finishes it (re-applied or
//! rolled back, as its record says). So an
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

use crate::btree::node::max_key_len;
use crate::btree::BTree;
use crate::engine::commit::CommitTicket;
use crate::error::{Error, Result};
use crate::lob::Bundle;
use crate::metrics::Metrics;
use crate::page::{Lsn, PageId};
use crate::undo::{RollPtr, UndoRecord};

use super::record::{self, Op};
use super::version::{self, Version};
use super::TrxSys;

/// How long an operation of a logged commit is retried before the engine
/// gives up on it (module doc).
pub(crate) const APPLY_RETRY_LIMIT: Duration = Duration::from_secs(600);

/// Log `ops` (sorted by table and key) as the commit record of `txn_id`,
/// apply them in that order and wait until the record is as durable as
/// `flush_log_at_trx_commit` asks. The caller holds the row lock of every
/// op, and records the commit's latency (`Metrics::trx_commit_latency`
/// says which interval). Returns, per op, whether its key was present
/// before.
///
/// A write set of inline values is logged keys only (`record`'s module
/// doc): a crash before its marker is durable rolls it back. One with a
/// large value is logged whole, and re-applied by recovery, as is every
/// commit with `whole` set (recovery's compensations).
pub(super) fn log_and_apply(sys: &TrxSys, txn_id: u64, ops: &[Op<'_>]) -> Result<Vec<bool>> {
    log_and_apply_as(sys, txn_id, ops, false)
}

fn log_and_apply_as(sys: &TrxSys, txn_id: u64, ops: &[Op<'_>], whole: bool) -> Result<Vec<bool>> {
    let e = &*sys.engine;
    let inline = version::max_inline_len(e.page_size());
    let large = |op: &&Op<'_>| op.value.is_some_and(|v| v.len() > inline);
    if !ops.iter().any(|op| large(&op)) {
        let rec = if whole {
            record::encode(txn_id, ops)
        } else {
            record::encode_keys(txn_id, ops)
        };
        return log_apply_wait(sys, txn_id, ops, rec, Bundle::new(&sys.lobs, e));
    }
    // Values too long for a leaf go to overflow chains first, in op order,
    // and the record carries their pointers (`lob`'s module doc). A
    // failure before the record is logged frees them (the bundle's drop).
    let mut bundle = Bundle::new(&sys.lobs, e);
    let mut pointers = Vec::new();
    for op in ops.iter().filter(large) {
        if let Some(v) = op.value {
            pointers.push(bundle.write(v)?.to_bytes());
        }
    }
    let mut next = pointers.iter();
    let ops: Vec<Op<'_>> = ops
        .iter()
        .map(|op| {
            if large(&op) {
                Op {
                    value: next.next().map(|p| &p[..]),
                    external: true,
                    ..*op
                }
            } else {
                *op
            }
        })
        .collect();
    let rec = record::encode(txn_id, &ops);
    log_apply_wait(sys, txn_id, &ops, rec, bundle)
}

/// Log `rec`, the record of `ops` (large values written to `bundle`'s
/// chains already), apply them, clear the bundle's directory slot, finish
/// and wait for the log.
fn log_apply_wait(
    sys: &TrxSys,
    txn_id: u64,
    ops: &[Op<'_>],
    rec: Vec<u8>,
    bundle: Bundle<'_>,
) -> Result<Vec<bool>> {
    let e = &*sys.engine;
    let rec: Arc<[u8]> = rec.into();
    let ticket = e.begin_commit(rec)?;
    let bundle = bundle.keep();
    let found = apply_all(sys, &ticket, txn_id, ops)?;
    if let Some(first) = bundle {
        retire_with_retry(sys, ticket.lsn, first)?;
    }
    let lsn = ticket.finish()?;
    e.wait_durable(lsn)?;
    Ok(found)
}

/// The first overflow chain of a commit's bundle: its first external op's
/// (the chains are written in op order).
fn first_chain(ops: &[Op<'_>]) -> Option<(u32, u64)> {
    ops.iter()
        .filter(|op| op.external)
        .find_map(|op| op.value.and_then(crate::lob::Pointer::from_bytes))
        .map(|p| (p.head, p.id))
}

/// Clear the directory slot of the commit's chains, all referenced now,
/// before its "applied" marker: retried as an op is ([`with_retry`]).
fn retire_with_retry(sys: &TrxSys, commit: Lsn, first: (u32, u64)) -> Result<()> {
    let e = &*sys.engine;
    with_retry(e, commit, || {
        sys.lobs
            .retire(e, crate::engine::admission::Purpose::InFlight, first)
    })
}

/// Count one committed transaction's latency: `waited`, every wait its
/// caller saw on the way to the commit (`Metrics::trx_commit_latency`).
pub(super) fn record_latency(sys: &TrxSys, waited: Duration) {
    let us = u64::try_from(waited.as_micros()).unwrap_or(u64::MAX);
    sys.engine.metrics.trx_commit_latency.record(us);
}

fn apply_all(
    sys: &TrxSys,
    ticket: &CommitTicket<'_>,
    txn_id: u64,
    ops: &[Op<'_>],
) -> Result<Vec<bool>> {
    let e = &*sys.engine;
    let commit = ticket.lsn;
    // 1. Each row's latest version, and what its undo record keeps.
    let mut plans = Vec::with_capacity(ops.len());
    for op in ops {
        plans.push(with_retry(e, commit, || plan(e, commit, op))?);
    }
    // 2. The undo records, in one call (most often one mtr), before any
    // row points to them.
    let recs: Vec<UndoRecord<'_>> = plans
        .iter()
        .zip(ops)
        .filter_map(|(p, op)| p.undo_record(commit, op))
        .enumerate()
        .map(|(i, rec)| UndoRecord {
            first: i == 0,
            ..rec
        })
        .collect();
    let mut rolls = Vec::with_capacity(recs.len());
    if !recs.is_empty() {
        let rseg = (txn_id % crate::undo::N_RSEGS as u64) as usize;
        let budget = ticket.op_budget();
        with_retry(e, commit, || {
            sys.undo.append_all(e, &budget, rseg, &recs, &mut rolls)
        })?;
        // Between the undo records and the rows pointing to them: a
        // crash here makes recovery append the records again.
        e.failpoints.hit("commit.undo_appended");
        Metrics::add(&e.metrics.trx_undo_records, recs.len() as u64);
        let deltas = recs.iter().filter(|r| r.delta).count() as u64;
        Metrics::add(&e.metrics.trx_undo_delta_records, deltas);
    }
    // 3. The new versions, each pointing to its undo record.
    let mut rolls = rolls.into_iter();
    let mut found = Vec::with_capacity(ops.len());
    for (i, (p, op)) in plans.iter().zip(ops).enumerate() {
        if i == 1 {
            // The first row is in place, the others are not (tests of
            // what readers see meanwhile).
            e.failpoints.hit("commit.between_ops");
        }
        found.push(p.existed);
        let roll = match p.roll {
            Roll::Unchanged => continue,
            Roll::Known(r) => r,
            Roll::Undo => rolls.next().ok_or_else(|| {
                Error::Corruption(format!(
                    "commit at LSN {commit}: an undo record went missing"
                ))
            })?,
        };
        let new = p.new_version(commit, roll, op)?;
        let tree = BTree::open(PageId::new(e.space_id(), op.root));
        let budget = ticket.op_budget();
        with_retry(e, commit, || tree.put_in(e, &budget, op.key, &new))?;
    }
    Ok(found)
}

/// Run `step` of the logged commit `commit` until it succeeds or fails for
/// a reason that does not pass (module doc).
fn with_retry<T>(
    e: &crate::engine::Engine,
    commit: Lsn,
    mut step: impl FnMut() -> Result<T>,
) -> Result<T> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(1);
    let mut last_report = started;
    loop {
        let err = match step() {
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
                "commit at LSN {commit} is logged but applying it failed ({err}); retrying \
                 for up to {APPLY_RETRY_LIMIT:?} (waited {:?} so far)",
                started.elapsed()
            );
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

/// Where the new version of an op's row points.
enum Roll {
    /// Nothing to write: a delete of a row that is absent or delete-marked.
    Unchanged,
    /// Known without an undo record: none for an insert (as InnoDB's
    /// insert undo, which no read view needs once the insert committed),
    /// or, applied before (recovery, or a retry), the record the row
    /// already points to.
    Known(RollPtr),
    /// To the undo record appended for it.
    Undo,
}

/// One op of a commit, as its row stood before any of the commit's undo
/// records was appended.
struct Plan {
    /// The row's stored bytes (latest version).
    cur: Option<Vec<u8>>,
    /// The row existed (latest version, not delete-marked).
    existed: bool,
    roll: Roll,
    /// With [`Roll::Undo`], the delta of the old version the undo record
    /// keeps, where shorter than the version itself.
    delta: Option<Vec<u8>>,
}

/// Read `op`'s row and decide what applying it takes. Idempotent:
/// recovery may apply an op whose earlier application reached the tree,
/// and a retry one whose undo record was written; an undo record nobody
/// points to is only purged. The committer holds the row lock, so the row
/// stays as read until the new version replaces it, but for purge, which
/// may remove a delete mark every view sees as deleted: the version the
/// undo record keeps reads the same either way (module doc).
fn plan(e: &crate::engine::Engine, commit: Lsn, op: &Op<'_>) -> Result<Plan> {
    let tree = BTree::open(PageId::new(e.space_id(), op.root));
    let cur = tree.get(e, op.key)?;
    let before = match &cur {
        Some(s) => Some(Version::decode(s, op.root)?),
        None => None,
    };
    let existed = before.is_some_and(|v| !v.deleted);
    let (roll, delta) = match before {
        Some(v) if v.trx_no == commit => (Roll::Known(v.roll), None),
        _ if op.value.is_none() && !existed => (Roll::Unchanged, None),
        None => (Roll::Known(RollPtr::NONE), None),
        Some(_) => {
            // An update keeps only what it changes where that is shorter,
            // a delete only the old header (`version::undo_delta`).
            let base = op
                .value
                .unwrap_or_else(|| version::kept_by_mark(before.as_ref()));
            let delta = cur
                .as_deref()
                .and_then(|c| version::undo_delta(c, base, op.external));
            (Roll::Undo, delta)
        }
    };
    Ok(Plan {
        cur,
        existed,
        roll,
        delta,
    })
}

impl Plan {
    /// The undo record of `op` (`first` unset), if it needs one.
    fn undo_record<'a>(&'a self, commit: Lsn, op: &Op<'a>) -> Option<UndoRecord<'a>> {
        matches!(self.roll, Roll::Undo).then(|| UndoRecord {
            first: false,
            del_mark: op.value.is_none(),
            commit,
            root: op.root,
            key: op.key,
            old: self.delta.as_deref().or(self.cur.as_deref()),
            delta: self.delta.is_some(),
        })
    }

    /// The version replacing the row, pointing to `roll`: the op's value,
    /// or a delete mark keeping the row's inline bytes (`version`'s module
    /// doc): from the version it replaces, or on a second application
    /// from the mark itself, so the bytes are the same.
    fn new_version(&self, commit: Lsn, roll: RollPtr, op: &Op<'_>) -> Result<Vec<u8>> {
        Ok(match op.value {
            Some(_) => version::encode(commit, roll, op.value, op.external),
            None => {
                let before = match &self.cur {
                    Some(s) => Some(Version::decode(s, op.root)?),
                    None => None,
                };
                version::encode_mark(commit, roll, version::kept_by_mark(before.as_ref()))
            }
        })
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

/// Finish a commit recovery found logged at `lsn` but not applied: enter it
/// in flight again and apply its record. Idempotent (puts and deletes are),
/// so it may have been partly or wholly applied before the crash. Returns
/// the number of ops.
pub(crate) fn finish_unapplied(sys: &TrxSys, lsn: Lsn, rec: Arc<[u8]>) -> Result<usize> {
    let r = record::decode(&rec)?;
    if !r.values {
        return Err(Error::Corruption(format!(
            "the commit logged at LSN {lsn} has a keys-only record: it can only be rolled back"
        )));
    }
    let ticket = sys.engine.resume_commit(lsn, rec.clone())?;
    apply_all(sys, &ticket, r.txn_id, &r.ops)?;
    if let Some(first) = first_chain(&r.ops) {
        retire_with_retry(sys, lsn, first)?;
    }
    ticket.finish()?;
    Ok(r.ops.len())
}

/// Roll back a keys-only commit recovery found logged at `lsn` without
/// its marker (module doc, "Rolling back a commit a crash cut short"):
/// every row that carries its version goes back to the version before,
/// in one compensating commit logged whole; then its own marker ends it.
/// Idempotent: run again after a crash, it finds the compensation
/// re-applied (the open re-applies whole records first) and its rows
/// carrying that commit instead. Returns the number of rows it changed.
pub(crate) fn roll_back_unfinished(sys: &TrxSys, lsn: Lsn, rec: Arc<[u8]>) -> Result<usize> {
    let r = record::decode(&rec)?;
    if r.values {
        return Err(Error::Corruption(format!(
            "the commit logged at LSN {lsn} has a whole record: it is re-applied, not rolled back"
        )));
    }
    let e = &*sys.engine;
    let ticket = e.resume_commit(lsn, rec.clone())?;
    // Each op's row, and the value it goes back to (`None`: deleted).
    let mut back: Vec<(&Op<'_>, Option<Vec<u8>>)> = Vec::new();
    for op in &r.ops {
        let tree = BTree::open(PageId::new(e.space_id(), op.root));
        let Some(stored) = with_retry(e, lsn, || tree.get(e, op.key))? else {
            continue;
        };
        let v = Version::decode(&stored, op.root)?;
        if v.trx_no == lsn {
            back.push((op, super::read::before(sys, op.root, op.key, &stored)?));
        } else if v.external.is_some() && !v.deleted {
            // Not written, but its undo record may have been appended:
            // that record holds this very version, and purge would free
            // its overflow chain under the row. A copy in a chain of its
            // own takes the row's place.
            back.push((op, v.row(e, e.space_id())?));
        }
    }
    if !back.is_empty() {
        let ops: Vec<Op<'_>> = back
            .iter()
            .map(|(op, value)| Op {
                value: value.as_deref(),
                external: false,
                ..**op
            })
            .collect();
        log_and_apply_as(sys, sys.next_id(), &ops, true)?;
        // The compensation is durable, this commit's marker not appended.
        e.failpoints.hit("rollback.compensated");
    }
    ticket.finish()?;
    Ok(back.len())
}

/// `Table::put` (`value` given) and `Table::delete` as a one-operation
/// transaction: take the row lock (waiting behind a transaction that holds
/// it), log, apply, wait for durability, release. Returns whether the key
/// was present before. The whole call is its commit latency: the caller
/// waits in it for the writer pause, the row lock and the commit alike.
pub(crate) fn autocommit(
    sys: &TrxSys,
    t: &crate::Table,
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<bool> {
    let started = Instant::now();
    let (tree, table) = (t.tree, &*t.name);
    let e = &*sys.engine;
    match value {
        Some(v) => super::check_user_entry(e.page_size(), key, v)?,
        // Such a key cannot be stored, so it is not there to delete.
        None if key.len() > max_key_len(e.page_size()) => return Ok(false),
        None => {}
    }
    e.pace_writer()?;
    let id = sys.next_id();
    let entry = sys.active.register(id, true);
    let _registered = Registered { sys, id };
    let lk = (tree.root().page_no, key.to_vec());
    sys.locks.note_thread(id, std::thread::current().id());
    if let Err(err) = sys.lock(e, id, &lk, &t.name) {
        sys.locks.release(id, []);
        return Err(err);
    }
    entry.set_rows_locked(1);
    let ops = [Op {
        root: lk.0,
        key,
        value,
        external: false,
    }];
    // Inside the table from before the record is logged until the op is
    // applied (`catalog`'s module doc).
    let r = t.meta.enter(table, u64::MAX).and_then(|_inside| {
        entry.set_phase(super::active::Phase::Committing);
        log_and_apply(sys, id, &ops)
    });
    sys.locks.release(id, [&lk]);
    let found = r?;
    Metrics::add(&e.metrics.trx_commits, 1);
    record_latency(sys, started.elapsed());
    Ok(found.first().copied().unwrap_or(false))
}

/// A one-row commit's entry among the transactions under way, removed
/// however the commit ends.
struct Registered<'a> {
    sys: &'a TrxSys,
    id: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.sys.active.remove(self.id);
    }
}
