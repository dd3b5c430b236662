//! A commit in progress, from its logged record to its "applied" marker.
//!
//! [`Engine::begin_commit`] admits the record (see [`super::admission`]),
//! appends it and enters it in flight with the log; the caller applies the
//! write set, one operation at a time, each under its own log budget; then
//! [`CommitTicket::finish`] appends the marker, which takes the commit out
//! of flight. Until the marker is durable the checkpoint never passes the
//! newest copy of the record (`redo::inflight`, "Pinned until the marker is
//! durable"), so recovery finds a commit a crash interrupted and finishes
//! it: it re-applies a whole record, and rolls back a keys-only one
//! (`txn::commit`'s module doc). Either way the log decides, not the
//! trees.
//!
//! A ticket dropped unfinished (applying failed in a way retrying could not
//! mend) leaves the record in flight and poisons the engine: memory no
//! longer matches an atomic history, so writes are refused until a restart
//! lets recovery finish the commit from the log.

use std::sync::Arc;

use super::admission::{estimate, Applying, Budget, Purpose};
use super::Engine;
use crate::error::Result;
use crate::page::Lsn;
use crate::redo::format::GROUP_HDR;

/// Bytes of the "applied" marker group.
const MARKER: u64 = (GROUP_HDR + 8) as u64;

/// A commit whose record is logged and whose write set is being applied.
pub(crate) struct CommitTicket<'a> {
    engine: &'a Engine,
    /// The commit's id: the LSN of its record group.
    pub lsn: Lsn,
    record_len: u64,
    /// The marker's reservation is still held.
    marker_held: bool,
    /// Reserved with the record for the first operation, not yet handed out.
    first_op: std::cell::Cell<u64>,
    done: bool,
    /// Counts the commit until the ticket ends (dropped after `drop` ran).
    _applying: Applying<'a>,
}

impl Engine {
    /// Pause as the flushing policy's writer limit asks (see
    /// `Admission::pace`). A transaction calls this before it takes its
    /// first row lock, so that a paused writer holds no latch and no row
    /// lock: paused at commit, it kept its rows locked through the pause,
    /// and on a hot row every transaction queued behind it waited as long.
    pub fn pace_writer(&self) -> Result<()> {
        self.adm.check_writable(Purpose::New)?;
        self.failpoints.hit("writer.pace");
        self.adm.pace()
    }

    /// Log the commit record `record`: wait for log space if needed (the
    /// only point where a new commit may wait for flushing, holding no
    /// latch), append the record and enter the commit in flight. A record
    /// too large for this log is refused at once, before anything is logged.
    /// The writer was paced before it took its first row lock
    /// ([`Engine::pace_writer`]), not here.
    pub fn begin_commit(&self, record: Arc<[u8]>) -> Result<CommitTicket<'_>> {
        // Counted from here, so that closing waits for this commit or
        // refuses it (`admission`, "Closing").
        let applying = self.adm.admit_commit()?;
        self.adm.check_writable(Purpose::New)?;
        let record_len = record.len() as u64;
        let group = (GROUP_HDR + record.len()) as u64;
        // What the first operation usually logs (its undo record and its
        // leaf change), not its bound: see `admission`, "Estimates".
        let first_op = estimate(self.page_size(), self.page_size() / 8);
        self.adm
            .reserve_commit(record_len, group + MARKER + first_op, || {
                self.failpoints.hit("commit.waiting")
            })?;
        self.failpoints.hit("commit.admitted");
        match self.log.append_commit(record) {
            Ok(lsn) => {
                self.adm.release(group);
                Ok(CommitTicket::new(self, lsn, record_len, first_op, applying))
            }
            Err(e) => {
                self.adm.release(group + MARKER + first_op);
                self.adm.release_record(record_len);
                Err(e)
            }
        }
    }

    /// Take up again a commit recovery found logged at `lsn` but not
    /// applied: it is in flight again, to be finished like any other.
    pub fn resume_commit(&self, lsn: Lsn, record: Arc<[u8]>) -> Result<CommitTicket<'_>> {
        let record_len = record.len() as u64;
        self.adm.reserve(MARKER, Purpose::InFlight)?;
        // Recovery entered it in flight already; this keeps that entry.
        self.log.resume_commit(lsn, lsn, record);
        self.adm.resume_record(record_len);
        Ok(CommitTicket::new(
            self,
            lsn,
            record_len,
            0,
            self.adm.applying(),
        ))
    }
}

impl<'e> CommitTicket<'e> {
    /// A ticket for the commit logged at `lsn`, holding the marker's
    /// reservation and `first_op` bytes for its first operation.
    fn new(
        engine: &'e Engine,
        lsn: Lsn,
        record_len: u64,
        first_op: u64,
        applying: Applying<'e>,
    ) -> CommitTicket<'e> {
        CommitTicket {
            engine,
            lsn,
            record_len,
            marker_held: true,
            first_op: std::cell::Cell::new(first_op),
            done: false,
            _applying: applying,
        }
    }

    /// A budget for the next operation: the first one's was reserved with
    /// the record, the others start empty (and reserve as they go).
    pub fn op_budget(&self) -> Budget<'e> {
        self.engine
            .adm
            .prepaid(Purpose::InFlight, self.first_op.replace(0))
    }

    /// The write set has been applied to the trees: log that, so recovery
    /// need not re-apply it, and let the checkpoint pass once the marker is
    /// durable. Returns the LSN the caller must make durable.
    pub fn finish(mut self) -> Result<Lsn> {
        let end = self.engine.log.append_applied(self.lsn)?;
        self.done = true;
        self.engine.adm.release(MARKER);
        self.marker_held = false;
        self.engine.adm.release_record(self.record_len);
        Ok(end)
    }
}

impl Drop for CommitTicket<'_> {
    fn drop(&mut self) {
        self.engine.adm.release(self.first_op.get());
        if self.marker_held {
            self.engine.adm.release(MARKER);
        }
        if !self.done {
            // Applying failed half way: the record stays in flight so the
            // checkpoint never passes it; recovery will finish it.
            self.engine.adm.poison.set(format!(
                "the commit logged at LSN {} could not be applied after an error; restart the \
                 engine so that recovery completes it from the redo log",
                self.lsn
            ));
            log::error!(
                "commit at LSN {} was not fully applied; writes are refused until a restart re-applies it",
                self.lsn
            );
        }
    }
}
