//! Transactions: private write sets, exclusive row locks, one logical
//! commit record each (keys only, most of them: `commit`'s module doc),
//! and multi-versioning (InnoDB's undo logs, read
//! views and purge) so that reads are consistent.
//!
//! # Isolation levels (InnoDB's names and default)
//!
//! - **REPEATABLE READ** (the default, `transaction_isolation`): a
//!   transaction's plain reads (`get`, `scan`, `scan_rev`) all see one
//!   snapshot, taken at its first plain read, plus its own writes.
//! - **READ COMMITTED**: each plain read call sees a snapshot taken when
//!   the call starts (a scan keeps the one of its start), plus its own
//!   writes.
//! - `Table::get`, `Table::range` and `Table::range_rev` outside a
//!   transaction see one snapshot for the whole call, however long the
//!   iteration runs.
//! - Locking reads (`get_for_update`) and writes (`put`, `delete`) act on
//!   the latest committed version, as in InnoDB: they lock the row and read
//!   what is there now, whatever the snapshot says.
//! - SERIALIZABLE is not offered (the option refuses it). There are no gap
//!   locks: a predicate read is not protected against inserts (phantoms
//!   are possible for locking reads; plain reads see their snapshot).
//!
//! **No read, at any level, sees some of a commit's rows and not the
//! others**, in one table or across tables: a snapshot sees a commit only
//! once all its rows are in place, and then all of them (`view`'s module
//! doc gives the argument).
//!
//! # Writes and locks
//!
//! - A transaction's writes go to a private write set; nothing reaches a
//!   page before commit, so rollback only discards the set and undo is
//!   never applied backwards at run time (recovery reads it to roll back a
//!   commit a crash cut short: `commit`'s module doc). Its own reads see
//!   its writes first.
//! - Every key written (`put`, `delete`) or read with `get_for_update` is
//!   locked exclusively until commit or rollback: no dirty writes, and no
//!   lost updates for a row read with `get_for_update` before it is
//!   written. (A row read with a plain read and then written may have
//!   changed since the snapshot: InnoDB's REPEATABLE READ behaves the
//!   same; use `get_for_update` for read-modify-write.)
//! - A second writer of a locked row waits up to `lock_wait_timeout`
//!   seconds, then gets [`Error::LockWaitTimeout`]: that statement failed,
//!   the transaction keeps its earlier writes and locks and may retry, go
//!   on, commit or roll back (InnoDB's default).
//! - A wait that would close a cycle of waiting transactions is refused at
//!   once with [`Error::Deadlock`], and (as in InnoDB) the requester's whole
//!   transaction is rolled back: its write set is discarded, its locks are
//!   released, and every later call returns [`Error::TxnAborted`].
//! - `Table::put`/`Table::delete` are one-row transactions (they wait for a
//!   row lock like any writer and are logged the same way).
//!
//! # Versions
//!
//! Every row in a table's leaf carries a version header (`version`): the
//! number of the commit that wrote it (its commit record's LSN), a roll
//! pointer to the undo record holding the version before, and a delete
//! mark. Commit logs the write set as one record (`record`: its keys, or
//! its values too where one is large), then applies it: it appends the
//! versions it replaces to an undo page (`undo`; an insert has none to
//! keep), all of them in one mini-transaction where
//! they fit one page, then writes, in (table, key) order, each new
//! version, or a delete mark, pointing to its undo record. Undo pages are
//! ordinary pages: changed by mini-transactions, redo-logged, cached and
//! evicted by the buffer pool, written by the page cleaners; so a history
//! larger than memory is only a larger tablespace. A reader whose view does
//! not see a row's version rebuilds older ones from the chain (`read`).
//! An update that changes a few bytes of an inline row keeps only those:
//! its undo record is a delta of the new version's value, which a reader
//! following the chain holds when it reaches the record
//! (`version::undo_delta`, `undo`'s module doc, "Deltas").
//! The commit then waits for the log as `flush_log_at_trx_commit` asks and
//! releases its locks. Others see the commit once every row is in place,
//! before the log is durable (as in InnoDB with group commit).
//!
//! A value too long for its leaf is written to an overflow chain before
//! the commit record, which, like the row and any undo record holding the
//! version later, carries only a pointer to it; every version owns its
//! chain, and the chain goes when the version does (`lob`'s module doc).
//!
//! Purge (`purge`) drops undo records no view can need (freeing the
//! overflow chains of the versions they hold) and removes delete
//! marks no view can see; `trx_rseg_history_len` counts the commits whose
//! undo is still kept. A view held open makes the history grow; writers
//! are never stopped for it, and `Db::history` names the view.
//!
//! # Bulk loads and snapshots
//!
//! Rows loaded by `Table::bulk_load` carry commit number 0, which every
//! view sees: a snapshot taken before the load finished sees the loaded
//! rows once the load is published (all at once). Loads fill only empty
//! tables, which no transaction has written.
//!
//! # Transactions under way
//!
//! Every `Txn`, and every one-row commit of `Table::put`/`Table::delete`,
//! is entered in a registry (`active`) when it begins and removed when it
//! ends, with its start, thread, rows locked and whether it is committing;
//! the status report joins it with the lock manager's waits (`report`).
//! The registry's shards are leaf mutexes held only to insert, remove or
//! copy an entry (`active`'s module doc gives the protocol), and a
//! transaction updates its own entry through atomics.
//!
//! A `Txn` is `Send`: one thread at a time uses it; any number run
//! concurrently.

mod active;
mod check;
mod commit;
mod lock;
mod purge;
mod read;
pub(crate) mod record;
mod report;
mod scan;
pub(crate) mod version;
mod view;

use std::collections::{BTreeMap, HashSet};
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use report::{Deadlock, DeadlockTxn, LockWait, RowLock, TxnState, TxnStatus};
pub use scan::Scan;

pub(crate) use commit::{autocommit, finish_unapplied, roll_back_unfinished};
pub(crate) use lock::{LockError, LockKey, LockManager};
pub(crate) use read::Snapshot;
pub(crate) use version::max_user_value_len;

use crate::btree::node::{check_key, max_key_len};
use crate::btree::BTree;
use crate::config::Isolation;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::table::Table;
use crate::undo::UndoSpace;
use record::Op;
use scan::TableWrites;
use view::{ReadView, Views};

/// Transaction state shared by a database: the engine, ids and the
/// row-lock manager (InnoDB's `trx_sys` and `lock_sys`).
pub(crate) struct TrxSys {
    pub(crate) engine: Arc<Engine>,
    /// The tables: which roots purge may still follow
    /// ([`Catalog::created`](crate::catalog::Catalog::created)).
    pub(crate) catalog: Arc<crate::catalog::Catalog>,
    next_id: AtomicU64,
    pub(crate) locks: LockManager,
    /// The undo pages: the versions rows had before their latest commits.
    pub(crate) undo: UndoSpace,
    /// The overflow chains of large values in flight (`lob`).
    pub(crate) lobs: crate::lob::Lobs,
    /// The open read views.
    pub(crate) views: Arc<Views>,
    /// The purge threads, while they run.
    purge: parking_lot::Mutex<Option<purge::Purge>>,
    /// The transactions under way (`active`'s module doc).
    pub(crate) active: active::Active,
    /// The last deadlock refused, and when (`report`).
    latest_deadlock: parking_lot::Mutex<Option<(Instant, Deadlock)>>,
}

impl TrxSys {
    /// The transaction system of the engine `engine`, whose recovery has
    /// run (the undo pages are read from the recovered space).
    pub(crate) fn open(
        engine: Arc<Engine>,
        catalog: Arc<crate::catalog::Catalog>,
    ) -> Result<TrxSys> {
        let undo = UndoSpace::open(&engine)?;
        let lobs = crate::lob::Lobs::open(&engine)?;
        Ok(TrxSys {
            lobs,
            catalog,
            views: Arc::new(Views::new(engine.log.clone(), engine.metrics.clone())),
            locks: LockManager::new(Arc::clone(&engine.metrics)),
            engine,
            next_id: AtomicU64::new(0),
            undo,
            purge: parking_lot::Mutex::new(None),
            active: active::Active::new(),
            latest_deadlock: parking_lot::Mutex::new(None),
        })
    }

    /// Start the purge threads (`purge_threads` of them).
    pub(crate) fn start_purge(self: &Arc<Self>) -> Result<()> {
        let p = purge::Purge::start(self.clone(), self.engine.opts.purge_threads)?;
        *self.purge.lock() = Some(p);
        Ok(())
    }

    /// Stop the purge threads and wait for them (at close, at a simulated
    /// crash): a purge step under way finishes or fails first.
    pub(crate) fn stop_purge(&self) {
        let p = self.purge.lock().take();
        if let Some(p) = p {
            p.stop();
        }
    }

    /// The history and purge, for `Db::history`.
    pub(crate) fn history(&self) -> HistoryStatus {
        let m = &self.engine.metrics;
        let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
        HistoryStatus {
            history_len: self.undo.history_len(),
            undo_pages: self.undo.pages(),
            undo_pages_in_pool: self.engine.pool.pages_of_type(crate::page::PageType::Undo),
            pool_pages: self
                .engine
                .pool
                .instances
                .iter()
                .map(|i| i.frames.len() as u64)
                .sum(),
            views_open: self.views.count(),
            oldest_view: self.views.oldest(),
            purged_records: get(&m.purge_undo_records),
            purged_pages: get(&m.purge_undo_log_pages),
            purged_del_marks: get(&m.purge_del_mark_records),
        }
    }

    /// A read view for transaction `txn_id` (0: a read outside one).
    pub(crate) fn view(&self, txn_id: u64) -> Arc<ReadView> {
        self.views.open(txn_id)
    }

    /// `key` of `tree` in a snapshot taken now (`Table::get`).
    pub(crate) fn get_now(&self, tree: BTree, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if key.len() > max_key_len(self.engine.page_size()) {
            return Ok(None);
        }
        read::get(self, &self.view(0), tree, key)
    }

    /// Rows of `tree` between `lo` and `hi` in a snapshot taken now
    /// (`Table::range`), however long the iteration runs.
    pub(crate) fn range_now(
        &self,
        tree: BTree,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        reverse: bool,
    ) -> Snapshot<'_> {
        Snapshot::new(self, self.view(0), tree, lo, hi, reverse)
    }

    /// A fresh transaction id (unique within this open of the database).
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Take the row lock `key` of `table` for `txn`, counting waits,
    /// timeouts and deadlocks; a deadlock becomes the latest one.
    pub(crate) fn lock(&self, e: &Engine, txn: u64, key: &LockKey, table: &Arc<str>) -> Result<()> {
        let m = &e.metrics;
        let timeout = e.live.lock_wait_timeout();
        let count_wait = |w: Duration| {
            Metrics::add(&m.lock_row_lock_waits, 1);
            Metrics::add(&m.lock_row_lock_time_ms, w.as_millis() as u64);
        };
        match self.locks.lock(txn, key, table, timeout) {
            Ok(None) => Ok(()),
            Ok(Some(waited)) => {
                count_wait(waited);
                Ok(())
            }
            Err(LockError::Timeout(waited)) => {
                count_wait(waited);
                Metrics::add(&m.lock_timeouts, 1);
                Err(Error::LockWaitTimeout {
                    table: table.to_string(),
                    waited,
                })
            }
            Err(LockError::Deadlock(cycle)) => {
                Metrics::add(&m.lock_deadlocks, 1);
                self.record_deadlock(cycle);
                Err(Error::Deadlock {
                    table: table.to_string(),
                })
            }
            Err(LockError::SelfDeadlock(owner)) => Err(Error::SelfDeadlock {
                table: table.to_string(),
                owner,
            }),
        }
    }
}

/// The history (the undo records kept for read views) and purge, as the
/// status report shows them ([`Db::history`](crate::Db::history)).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct HistoryStatus {
    /// Committed transactions whose undo is not purged yet (InnoDB's
    /// `trx_rseg_history_len`).
    pub history_len: u64,
    /// Undo pages in use (linked in a rollback segment).
    pub undo_pages: u64,
    /// Undo pages cached in the buffer pool now.
    pub undo_pages_in_pool: u64,
    /// Frames in the buffer pool.
    pub pool_pages: u64,
    /// Read views open now.
    pub views_open: u64,
    /// The oldest open read view: the one that holds purge back.
    pub oldest_view: Option<ViewInfo>,
    /// Undo records purged since open.
    pub purged_records: u64,
    /// Undo pages purge freed since open.
    pub purged_pages: u64,
    /// Delete-marked records purge removed since open.
    pub purged_del_marks: u64,
}

/// One open read view, as [`HistoryStatus::oldest_view`] names it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ViewInfo {
    /// The transaction that holds it (0 for a `Table::get`/`Table::range`
    /// outside any transaction).
    pub txn_id: u64,
    /// How long it has been open, in milliseconds.
    pub age_ms: u64,
    /// The name of the thread that opened it, if it has one.
    pub thread: Option<String>,
}

/// Reject keys and values a table cannot store on pages of this size (the
/// tree's limits less the version header).
pub(crate) fn check_user_entry(page_size: usize, key: &[u8], value: &[u8]) -> Result<()> {
    check_key(page_size, key)?;
    let max = max_user_value_len(page_size);
    if value.len() > max {
        return Err(Error::ValueTooLarge {
            len: value.len(),
            max,
        });
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Active,
    /// Rolled back after a deadlock; every call fails.
    Aborted,
    /// Committed or rolled back; nothing left to release.
    Done,
}

/// A transaction. Writes stay private until [`Txn::commit`]; dropping an
/// uncommitted transaction rolls it back.
///
/// # Panics
/// Every method taking a `&Table` panics if the table belongs to another
/// database.
pub struct Txn {
    sys: Arc<TrxSys>,
    /// Keeps the database open while the transaction lives (opaque here).
    _db: Arc<dyn std::any::Any + Send + Sync>,
    isolation: Isolation,
    /// The REPEATABLE READ snapshot, taken at the first plain read.
    view: std::cell::OnceCell<Arc<ReadView>>,
    id: u64,
    /// Table root page number → pending changes.
    writes: BTreeMap<u32, TableWrites>,
    /// The tables of `writes`, which the commit enters (`catalog`).
    written: Vec<(Arc<str>, Arc<crate::catalog::TableMeta>)>,
    /// The DDL epoch when the transaction began: a table truncated since
    /// fails its calls (`catalog`'s module doc).
    ddl_epoch: u64,
    /// Row locks held.
    locks: HashSet<LockKey>,
    state: State,
    /// The thread that used this transaction last, as the lock manager
    /// knows it (to refuse a thread waiting for itself).
    thread: std::cell::Cell<Option<std::thread::ThreadId>>,
    /// Time spent in the flushing policy's writer pause (taken at the
    /// first row lock, not at commit), charged to the commit's latency.
    paused: Duration,
    /// Its entry among the transactions under way (`active`).
    entry: Arc<active::Entry>,
}

impl Txn {
    /// A new transaction of `sys` at isolation level `isolation`; `db`
    /// keeps the database open until the transaction ends.
    pub(crate) fn begin(
        sys: Arc<TrxSys>,
        db: Arc<dyn std::any::Any + Send + Sync>,
        isolation: Isolation,
    ) -> Txn {
        let id = sys.next_id();
        Txn {
            entry: sys.active.register(id, false),
            id,
            ddl_epoch: sys.engine.ddl_epoch.load(Ordering::SeqCst),
            written: Vec::new(),
            sys,
            _db: db,
            isolation,
            view: std::cell::OnceCell::new(),
            writes: BTreeMap::new(),
            locks: HashSet::new(),
            state: State::Active,
            thread: std::cell::Cell::new(None),
            paused: Duration::ZERO,
        }
    }

    /// This transaction's isolation level.
    pub fn isolation(&self) -> Isolation {
        self.isolation
    }

    /// This transaction's id (written into its commit record).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The value of `key` as this transaction sees it: its own write if
    /// any, else the value in its snapshot (REPEATABLE READ: the snapshot
    /// of its first plain read; READ COMMITTED: one taken now). Takes no
    /// lock and never waits for a writer.
    pub fn get(&self, table: &Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check(table)?;
        // A plain read answered by the transaction's own write is still
        // its first plain read: under REPEATABLE READ the snapshot starts
        // here, not at a later read (which would then see commits made in
        // between; found by `tests/snapshot_model.rs`).
        if self.isolation == Isolation::RepeatableRead {
            self.read_view();
        }
        if let Some(w) = self.own_write(table, key) {
            return Ok(w.map(<[u8]>::to_vec));
        }
        if key.len() > max_key_len(self.sys.engine.page_size()) {
            return Ok(None);
        }
        // A truncate or drop meanwhile may have freed a large value's
        // chain under the read: report the table's change.
        read::get(&self.sys, &self.read_view(), table.tree, key)
            .map_err(|err| self.check(table).err().unwrap_or(err))
    }

    /// The view a plain read starts now uses (see [`Txn::get`]).
    fn read_view(&self) -> Arc<ReadView> {
        match self.isolation {
            Isolation::RepeatableRead => self.view.get_or_init(|| self.sys.view(self.id)).clone(),
            Isolation::ReadCommitted => self.sys.view(self.id),
        }
    }

    /// The latest committed value of `key`, or this transaction's own
    /// write (the caller holds the row lock).
    fn get_latest(&self, table: &Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(w) = self.own_write(table, key) {
            return Ok(w.map(<[u8]>::to_vec));
        }
        read::latest(&self.sys.engine, table.tree, key)
    }

    /// Lock `key` exclusively (waiting like a writer), then read its
    /// latest committed value (or this transaction's own write), whatever
    /// the snapshot says, as InnoDB's `SELECT ... FOR UPDATE` does. Until
    /// this transaction ends nobody else can change the row, so a
    /// read-modify-write through it loses no update.
    pub fn get_for_update(&mut self, table: &Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check(table)?;
        if key.len() > max_key_len(self.sys.engine.page_size()) {
            return Ok(None);
        }
        self.lock(table, key)?;
        self.get_latest(table, key)
    }

    /// Insert or replace `key` in this transaction's write set, after
    /// locking the row. Sizes are checked here, not at commit.
    pub fn put(&mut self, table: &Table, key: &[u8], value: &[u8]) -> Result<()> {
        self.check(table)?;
        self.sys.engine.adm.check_read_only()?;
        check_user_entry(self.sys.engine.page_size(), key, value)?;
        self.lock(table, key)?;
        self.set(table, key, Some(value.to_vec()));
        Ok(())
    }

    /// Delete `key` (after locking the row); true if its latest committed
    /// version (or this transaction's own write) exists.
    pub fn delete(&mut self, table: &Table, key: &[u8]) -> Result<bool> {
        self.check(table)?;
        self.sys.engine.adm.check_read_only()?;
        if key.len() > max_key_len(self.sys.engine.page_size()) {
            return Ok(false);
        }
        self.lock(table, key)?;
        let existed = self.get_latest(table, key)?.is_some();
        self.set(table, key, None);
        Ok(existed)
    }

    /// Rows in `range` as this transaction sees them, ascending. Iterate
    /// for owned rows, or call [`Scan::next_row`] for rows lent without a
    /// copy.
    pub fn scan<'k, R: RangeBounds<&'k [u8]>>(&self, table: &Table, range: R) -> Result<Scan<'_>> {
        self.scan_dir(table, range, false)
    }

    /// Rows in `range` as this transaction sees them, descending.
    pub fn scan_rev<'k, R: RangeBounds<&'k [u8]>>(
        &self,
        table: &Table,
        range: R,
    ) -> Result<Scan<'_>> {
        self.scan_dir(table, range, true)
    }

    fn scan_dir<'k, R: RangeBounds<&'k [u8]>>(
        &self,
        table: &Table,
        range: R,
        reverse: bool,
    ) -> Result<Scan<'_>> {
        self.check(table)?;
        let own = |b: Bound<&&[u8]>| b.map(|k| k.to_vec());
        let lo = own(range.start_bound());
        let hi = own(range.end_bound());
        let writes = self.writes.get(&table.tree.root().page_no);
        let rows = Snapshot::new(
            &self.sys,
            self.read_view(),
            table.tree,
            lo.clone(),
            hi.clone(),
            reverse,
        )
        .checking_ddl(table, self.ddl_epoch);
        Ok(Scan::new(rows, writes, &lo, &hi, reverse))
    }

    /// Make the writes durable and visible: one commit record in the redo
    /// log, applied to the trees, then (with `flush_log_at_trx_commit = 1`)
    /// synced; then the row locks are released. A transaction without
    /// writes only releases its locks.
    pub fn commit(mut self) -> Result<()> {
        let started = Instant::now();
        if self.state == State::Aborted {
            return Err(Error::TxnAborted);
        }
        let writes = std::mem::take(&mut self.writes);
        let ops: Vec<Op<'_>> = writes
            .iter()
            .flat_map(|(&root, w)| {
                w.iter().map(move |(key, value)| Op {
                    root,
                    key,
                    value: value.as_deref(),
                    external: false,
                })
            })
            .collect();
        let wrote = !ops.is_empty();
        let r = if !wrote {
            Ok(())
        } else {
            // Inside every table written, from before the record is logged
            // until it is applied (`catalog`'s module doc).
            // The guards leave when dropped, however the commit ends.
            let inside: Result<Vec<_>> = self
                .written
                .iter()
                .map(|(name, meta)| meta.enter(name, self.ddl_epoch))
                .collect();
            inside.and_then(|_inside| {
                self.entry.set_phase(active::Phase::Committing);
                commit::log_and_apply(&self.sys, self.id, &ops).map(drop)
            })
        };
        self.view.take();
        self.release();
        if r.is_ok() {
            Metrics::add(&self.sys.engine.metrics.trx_commits, 1);
            if wrote {
                commit::record_latency(&self.sys, self.paused + started.elapsed());
            }
        }
        r
    }

    /// Discard the writes and release the locks (dropping does the same).
    pub fn rollback(self) {}

    fn check(&self, table: &Table) -> Result<()> {
        // Locks held since another thread used this transaction now belong
        // to this thread's waits (see the lock manager's module doc).
        let me = std::thread::current().id();
        if !self.locks.is_empty() && self.thread.get() != Some(me) {
            self.sys.locks.note_thread(self.id, me);
            self.thread.set(Some(me));
        }
        assert!(
            Arc::ptr_eq(&self.sys, &table.sys),
            "table `{}` belongs to another database than transaction {}",
            table.name(),
            self.id
        );
        match self.state {
            State::Active => table.meta.check(&table.name, self.ddl_epoch),
            State::Aborted | State::Done => Err(Error::TxnAborted),
        }
    }

    fn own_write(&self, table: &Table, key: &[u8]) -> Option<Option<&[u8]>> {
        let w = self.writes.get(&table.tree.root().page_no)?;
        w.get(key).map(|v| v.as_deref())
    }

    fn set(&mut self, table: &Table, key: &[u8], value: Option<Vec<u8>>) {
        if !self
            .written
            .iter()
            .any(|(_, m)| Arc::ptr_eq(m, &table.meta))
        {
            self.written.push((table.name.clone(), table.meta.clone()));
        }
        self.writes
            .entry(table.tree.root().page_no)
            .or_default()
            .insert(key.to_vec(), value);
    }

    /// Take the row lock unless held; a deadlock rolls the whole
    /// transaction back.
    fn lock(&mut self, table: &Table, key: &[u8]) -> Result<()> {
        let lk = (table.tree.root().page_no, key.to_vec());
        if self.locks.contains(&lk) {
            return Ok(());
        }
        // Paced before the first lock, holding none (see
        // `Engine::pace_writer`); the pause is the commit's to report.
        if self.locks.is_empty() {
            let pacing = Instant::now();
            let paced = self.sys.engine.pace_writer();
            self.paused += pacing.elapsed();
            paced?;
        }
        let sys = &self.sys;
        let me = std::thread::current().id();
        if self.thread.get() != Some(me) {
            sys.locks.note_thread(self.id, me);
            self.thread.set(Some(me));
        }
        match sys.lock(&self.sys.engine, self.id, &lk, &table.name) {
            Ok(()) => {
                self.locks.insert(lk);
                self.entry.set_rows_locked(self.locks.len());
                Ok(())
            }
            Err(e @ Error::Deadlock { .. }) => {
                self.writes.clear();
                self.release();
                self.state = State::Aborted;
                Metrics::add(&self.sys.engine.metrics.trx_rollbacks, 1);
                log::debug!("txn {} rolled back: {e}", self.id);
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    fn release(&mut self) {
        let locks = std::mem::take(&mut self.locks);
        self.sys.locks.release(self.id, &locks);
        self.sys.active.remove(self.id);
        self.state = State::Done;
    }
}

impl Drop for Txn {
    fn drop(&mut self) {
        if self.state == State::Active {
            self.writes.clear();
            self.release();
            Metrics::add(&self.sys.engine.metrics.trx_rollbacks, 1);
        }
    }
}

impl std::fmt::Debug for Txn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Txn")
            .field("id", &self.id)
            .field("state", &self.state)
            .field(
                "writes",
                &self.writes.values().map(BTreeMap::len).sum::<usize>(),
            )
            .field("locks", &self.locks.len())
            .finish()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
