//! The public face: `Db`, the handle to an open database. Tables are in
//! `table`, the catalog of their names in `catalog`, transactions in `txn`.

mod open;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::btree::{BTree, TreeStats};
use crate::catalog::Catalog;
use crate::config::{Isolation, Options};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::flush::{Cleaners, Decision};
use crate::io::throttle::ThrottleStats;
use crate::io::{FileSystem, ThrottleSpec, ThrottledFileSystem};
use crate::metrics::Metrics;
use crate::table::Table;
use crate::txn::{TrxSys, Txn};

pub(crate) struct Inner {
    pub(crate) engine: Arc<Engine>,
    pub(crate) dir: PathBuf,
    pub(crate) catalog: Arc<Catalog>,
    pub(crate) cleaners: Mutex<Option<Cleaners>>,
    /// The transaction system: row locks, read views, undo, purge.
    pub(crate) trx: Arc<TrxSys>,
    pub(crate) crashed: std::sync::atomic::AtomicBool,
}

/// An open database. Cheap to clone; every clone refers to the same engine.
#[derive(Clone)]
pub struct Db {
    pub(crate) inner: Arc<Inner>,
}

impl Db {
    /// Does `dir` hold a database (its first data file)? A creation cut
    /// short counts too: opening it creates the database again.
    pub fn exists(dir: impl AsRef<Path>) -> bool {
        dir.as_ref().join(crate::space::data_file_name(0)).exists()
    }

    /// Open the database in `dir`, creating it (and the directory) if it
    /// does not exist. Options are validated first; an error names the key.
    ///
    /// With [`Options::read_only`] the database must exist and nothing is
    /// written: see [`Db::open_read_only`].
    ///
    /// One process per database: the open locks the directory (its file
    /// `keel.lock`, with `flock`) before it touches any other file, and
    /// holds the lock until [`Db::close`] has written its last page, the
    /// last handle is dropped, or the process ends. A directory that is
    /// open already, in another process or in this one, fails at once with
    /// [`Error::Locked`], naming the holder's pid where known (read-only
    /// opens share the lock: [`Db::open_read_only`]); a lock file
    /// left behind by a process that died does not block. To look at a
    /// database another process has open, read its files without the
    /// engine ([`format`](mod@crate::format): `keel inspect`, `keel check
    /// --read-only`).
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<Db> {
        Self::open_with_fs(dir, opts, None)
    }

    /// Open the database in `dir` for reading only (InnoDB's
    /// `innodb_read_only`): [`Db::open`] with [`Options::read_only`] set.
    ///
    /// Nothing is written to any file: no recovery, no page cleaner, no
    /// purge, no checkpoint at close. Every call that would write (a put,
    /// a delete, a new table, a bulk load, a checkpoint) fails with
    /// [`Error::ReadOnly`]; reads, scans and snapshots work as usual. The
    /// directory is locked shared, so any number of read-only opens (in
    /// this process or others) may share it, and none beside a writer:
    /// either side is refused with [`Error::Locked`].
    ///
    /// The database must have been closed cleanly. If its log holds redo
    /// after the last checkpoint (the last run crashed), the open is
    /// refused with [`Error::ReadOnly`] naming the LSNs: recovering it
    /// would write. Open it once without `read_only` to recover it.
    pub fn open_read_only(dir: impl AsRef<Path>, mut opts: Options) -> Result<Db> {
        opts.read_only = true;
        Self::open(dir, opts)
    }

    /// Like [`Db::open`] but on a caller-supplied file system (tests use
    /// this to inject faults or a device model), which also takes the
    /// directory's lock ([`FileSystem::lock_dir`]).
    pub fn open_with_fs(
        dir: impl AsRef<Path>,
        opts: Options,
        fs: Option<Arc<dyn FileSystem>>,
    ) -> Result<Db> {
        let dir = dir.as_ref().to_path_buf();
        let (engine, created) = Engine::open(&dir, opts, fs, crate::btree::node::validate)?;
        let engine = Arc::new(engine);
        let catalog = Arc::new(Catalog::open(&engine));
        if engine.opts.read_only {
            return Self::finish_read_only_open(engine, dir, catalog);
        }
        let unfinished = if created {
            open::format_space(&engine)?;
            Vec::new()
        } else {
            let (report, unfinished) = crate::redo::recovery::recover(
                &engine.log,
                &engine.pool,
                &engine.metrics,
                engine.torn_pages_repaired,
            )?;
            if report.groups > 0 || report.torn_pages_repaired > 0 {
                log::warn!("recovery of {}: {report}", dir.display());
            }
            // Before this run's first append (see `Log::begin_epoch`).
            engine.log.begin_epoch()?;
            unfinished
        };
        let n = engine.opts.effective_page_cleaners();
        let policy = crate::flush::policy::from_options(&engine.opts);
        let mut cleaners = Cleaners::start(engine.clone(), n, policy)
            .map_err(|e| Error::io(&dir, "start page cleaner thread", e))?;
        // Commits the crash interrupted are finished like any commit, with
        // the cleaners running (they may need log space), then a sharp
        // checkpoint leaves nothing for the next open to redo. Purge starts
        // last: it resumes the history the last run left.
        let trx = TrxSys::open(engine.clone(), catalog.clone()).map(Arc::new);
        let finished = trx.and_then(|trx| {
            open::finish_recovery(&trx, unfinished)?;
            // Before unfinished loads are dropped (`lob`'s module doc).
            trx.lobs.free_orphans(&engine)?;
            open::finish_bulk_loads(&engine, catalog.tree, created)?;
            catalog.load(&engine)?;
            catalog.reclaim_dropped(&engine)?;
            trx.start_purge()?;
            Ok(trx)
        });
        let trx = match finished {
            Ok(trx) => trx,
            Err(e) => {
                cleaners.stop(&engine.wb);
                return Err(e);
            }
        };
        log::info!(
            "{} database in {} ({} frames of {} bytes, {} instances, {} data files)",
            if created { "created" } else { "opened" },
            dir.display(),
            engine
                .pool
                .instances
                .iter()
                .map(|i| i.frames.len())
                .sum::<usize>(),
            engine.page_size(),
            engine.pool.instances.len(),
            engine.opts.data_files,
        );
        Ok(Self::assemble(engine, dir, catalog, trx, Some(cleaners)))
    }

    /// The handle over an engine whose open is finished.
    fn assemble(
        engine: Arc<Engine>,
        dir: PathBuf,
        catalog: Arc<Catalog>,
        trx: Arc<TrxSys>,
        cleaners: Option<Cleaners>,
    ) -> Db {
        Db {
            inner: Arc::new(Inner {
                trx,
                engine,
                dir,
                catalog,
                cleaners: Mutex::new(cleaners),
                crashed: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    /// The rest of a read-only open (see [`Db::open_read_only`]): refused
    /// if the log holds redo to apply; no recovery, no cleaners, no purge.
    fn finish_read_only_open(
        engine: Arc<Engine>,
        dir: PathBuf,
        catalog: Arc<Catalog>,
    ) -> Result<Db> {
        if let Some((from, to)) = crate::redo::recovery::pending_redo(&engine.log)? {
            return Err(Error::ReadOnly(format!(
                "cannot open {} read-only: its redo log holds {} bytes after the last \
                 checkpoint (LSN {from} to {to}): the last run did not close cleanly, and \
                 recovering it would write. Open it once without read_only to recover it",
                dir.display(),
                to - from
            )));
        }
        catalog.load(&engine)?;
        let trx = Arc::new(TrxSys::open(engine.clone(), catalog.clone())?);
        log::info!("opened database in {} read-only", dir.display());
        Ok(Self::assemble(engine, dir, catalog, trx, None))
    }

    /// Whether this handle's database was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.inner.engine.opts.read_only
    }

    /// The flushing policy's last decision: its mode, the figures behind it
    /// and why it flushed what it flushed (for status reports).
    pub fn flush_decision(&self) -> Decision {
        self.inner.engine.wb.last_decision.lock().clone()
    }

    /// The directory the database lives in.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The options in effect: the ones the database was opened with, and
    /// every change made since by [`Db::set_option`] (or
    /// [`Db::set_device`]).
    pub fn options(&self) -> Options {
        self.inner.engine.live.current()
    }

    /// Change an option while the database runs, as InnoDB's `SET GLOBAL`
    /// does: `value` is text, as [`Options::set`] takes it (`"2000"`,
    /// `"classic"`, `"off"`).
    ///
    /// The options that change at run time are [`RUNTIME_OPTIONS`](crate::RUNTIME_OPTIONS):
    /// - `flush_policy`: the page cleaners follow the other policy from
    ///   their next round on (they are woken for it, so within
    ///   milliseconds unless a round is under way, which finishes under the
    ///   old one). A new `steady` starts measuring the device afresh;
    ///   leaving `steady` clears its writer pacing, and paused writers go
    ///   on at once. No commit waits for the switch and none is lost.
    /// - `classic`'s knobs (`io_capacity`, `io_capacity_max`,
    ///   `max_dirty_pages_pct`, `max_dirty_pages_pct_lwm`,
    ///   `adaptive_flushing`, `adaptive_flushing_lwm`,
    ///   `flushing_avg_loops`, `lru_scan_depth`, `flush_sync`): from the
    ///   next round, with the rates averaged so far kept. Under `steady`
    ///   they are stored and take effect if `classic` is chosen.
    /// - `flush_neighbors`: from the next batch written.
    /// - `flush_log_at_trx_commit`, `lock_wait_timeout`: from the next
    ///   commit, the next lock wait.
    /// - `fill_factor`: from the next [`Table::bulk_load`], which reads it
    ///   once when it starts (a load under way keeps the value it read).
    /// - `device`: as [`Db::set_device`].
    ///
    /// The value is checked as at open, against the other options too
    /// (`io_capacity` may not exceed an explicit `io_capacity_max`).
    /// Errors, each leaving every option as it was:
    /// [`Error::RestartRequired`] for an option that only takes effect at
    /// open (the message lists both kinds); [`Error::Config`] naming `key`
    /// for an unknown option or a bad value; [`Error::DeviceNotModelled`]
    /// as [`Db::set_device`]; [`Error::Closed`] once the database is
    /// closing.
    ///
    /// Safe to call from any thread while others read and write; nothing
    /// waits for the change (see the module `engine::live` for the
    /// protocol). [`Db::options`] shows the change as soon as this returns.
    pub fn set_option(&self, key: &str, value: &str) -> Result<()> {
        let cleaners = self.inner.cleaners.lock();
        let Some(c) = cleaners.as_ref() else {
            return Err(Error::Closed);
        };
        let e = &self.inner.engine;
        e.set_option(key, value, &|u| c.update_policy(u, &e.wb))
    }

    /// Make the data files' device model behave like `spec` (a preset name
    /// or `iops=..,bw=..,lat=..,seek=..,qd=..`, as the `device` option)
    /// while the database runs: a RAID battery failing, a backup taking
    /// half the disk. Every data file follows `spec` from its next request
    /// on; requests already in service finish under the old spec. The redo
    /// log is never throttled, before or after. `spec` may be `unlimited`
    /// (the model then delays nothing, and a later call may slow it again).
    ///
    /// Errors, both naming the `device` option: [`Error::Config`] for a
    /// spec that does not parse (naming the bad item, as [`Options::set`]
    /// does); [`Error::DeviceNotModelled`] for a database opened with
    /// `device = unlimited`, whose files pass through unwrapped and
    /// unmodelled so that an unthrottled database pays nothing for this
    /// call existing (open with a throttled device, e.g. `device = nvme`,
    /// to change it later), or opened on a caller-supplied file system
    /// ([`Db::open_with_fs`]). Neither changes anything.
    ///
    /// Safe to call from any thread while others read and write: the
    /// swap takes the model's lock for a moment, as every request's
    /// admission does, and no request is lost, repeated or reordered.
    ///
    /// [`Db::options`] reports the new `device` from then on; this is
    /// `set_option("device", spec)`.
    pub fn set_device(&self, spec: &str) -> Result<()> {
        self.set_option("device", spec)
    }

    /// The spec the data files' device model follows now (the `device`
    /// option, or what [`Db::set_device`] last made it); `None` when no
    /// model stands in front of them (`device = unlimited`, or
    /// [`Db::open_with_fs`]).
    pub fn device(&self) -> Option<ThrottleSpec> {
        self.inner
            .engine
            .device_model()
            .map(ThrottledFileSystem::spec)
    }

    /// The device model's counters since the database was opened: requests
    /// admitted, bytes, time callers slept in the throttle (see
    /// [`ThrottleStats`]); `None` when there is no model (see
    /// [`Db::device`]).
    pub fn device_stats(&self) -> Option<ThrottleStats> {
        self.inner
            .engine
            .device_model()
            .map(ThrottledFileSystem::stats)
    }

    /// The history list, the oldest read view and purge's progress (for
    /// status reports): see [`HistoryStatus`](crate::HistoryStatus).
    pub fn history(&self) -> crate::HistoryStatus {
        self.inner.trx.history()
    }

    /// The engine status report, as InnoDB's `SHOW ENGINE INNODB STATUS`
    /// gives it: print it for the text, or read its fields (see
    /// [`Status`](crate::Status)): waits, the log and the checkpoint age
    /// against its marks, the buffer pool, flushing, the latest deadlock,
    /// and the transactions under way with the row each one waits for and
    /// who holds it. Rates per second need an earlier instant: see
    /// [`Status::with_rates`](crate::Status::with_rates) and
    /// [`Db::status_source`]. Reading it takes no engine lock but a few
    /// leaf mutexes, each for a copy; nobody waits for it.
    pub fn status(&self) -> crate::Status {
        crate::Status::collect(&self.inner.trx, self.inner.dir.clone())
    }

    /// A handle that takes this database's status report without keeping
    /// the database open (for an endpoint or a monitor that may outlive
    /// it): each report has the rates per second since the one before.
    pub fn status_source(&self) -> crate::StatusSource {
        crate::StatusSource::new(&self.inner.trx, self.inner.dir.clone())
    }

    /// The doublewrite mode in effect and why, e.g. `atomic (device
    /// promises untorn writes up to 16 KiB)`: for status reports.
    pub fn doublewrite(&self) -> &crate::DoublewriteStatus {
        &self.inner.engine.doublewrite
    }

    /// The engine's counters and gauges.
    pub fn metrics(&self) -> &Metrics {
        &self.inner.engine.metrics
    }

    /// The metrics, shared: a handle that stays readable after the
    /// database is closed (for an exporter that outlives it).
    pub fn metrics_shared(&self) -> Arc<Metrics> {
        Arc::clone(&self.inner.engine.metrics)
    }

    /// Serve this database's metrics at `http://ADDR/metrics` in
    /// Prometheus's text format, and its status report ([`Db::status`],
    /// with rates since the previous request) at `http://ADDR/status`, until
    /// the returned server is dropped; e.g.
    /// `db.serve_metrics("127.0.0.1:9187")`, then `keel status
    /// 127.0.0.1:9187`. Port 0 picks a free port
    /// ([`crate::MetricsServer::local_addr`]). Give a loopback address
    /// unless the scraper is on another host: the endpoint has no
    /// authentication. The server does not keep the database open: it
    /// outlives a closed database harmlessly (`/status` then answers 503).
    /// Needs the `prometheus` cargo feature.
    /// Errors: [`Error::MetricsListen`], naming the address.
    #[cfg(feature = "prometheus")]
    pub fn serve_metrics(&self, addr: &str) -> Result<crate::MetricsServer> {
        let metrics = Arc::clone(&self.inner.engine.metrics);
        let source = self.status_source();
        crate::MetricsServer::start_with_status(
            addr,
            move || metrics.render_prometheus(),
            move || source.status().map(|s| s.to_string()),
        )
    }

    /// Create a table; an error if one of that name exists.
    ///
    /// The table is durable when this returns `Ok`, whatever
    /// `flush_log_at_trx_commit` says (as [`Table::bulk_load`] is, and as
    /// InnoDB's DDL is): a crash after it keeps the table. If that final
    /// log sync fails, the table exists but may not survive a crash, and
    /// the log refuses every write, as after any failed sync, until a
    /// restart.
    pub fn create_table(&self, name: &str) -> Result<Table> {
        let t = self.inner.catalog.create(&self.inner.engine, name)?;
        Ok(self.handle(name, t))
    }

    /// Open an existing table.
    pub fn table(&self, name: &str) -> Result<Table> {
        let t = self.inner.catalog.lookup(&self.inner.engine, name)?;
        Ok(self.handle(name, t))
    }

    /// Copy the database into `dest` while it keeps running, as Percona
    /// XtraBackup copies InnoDB: the data files page by page, and the redo
    /// from the checkpoint in effect at the start to the end of the log
    /// when the last page was copied. Opening the copy (`Db::open`, or
    /// `keel check`) recovers it to that end: every transaction committed
    /// by then, and no part of any other. `dest` must not exist or be an
    /// empty directory; it gets no doublewrite files (the open creates
    /// them) and a redo log at least as large as this one's, larger if
    /// the backup outlasted a lap of the log.
    ///
    /// Writers go on meanwhile; the backup holds the checkpoint back only
    /// to what it has not copied of the redo yet. Works on a read-only
    /// open too. One backup at a time; see `backup`'s module doc for the
    /// protocol and what an error leaves behind.
    pub fn backup(&self, dest: impl AsRef<Path>) -> Result<crate::BackupReport> {
        crate::backup::backup(&self.inner.engine, dest.as_ref())
    }

    /// Drop table `name` (InnoDB's `DROP TABLE`): its name goes at once
    /// and its pages return to the free list in bounded steps, each one
    /// mini-transaction that fits the log (as a failed bulk load's).
    ///
    /// Crash-safe at every step: once the first step is durable the drop
    /// has happened, and an open after a crash finishes it. The call
    /// returns when every page but the root is free; the root page is
    /// freed by the next open. Every handle of the table (and every
    /// transaction that wrote to it) fails its later calls with
    /// [`Error::TableDropped`]. Commits on the table that are under way
    /// finish first: the drop waits for them up to `lock_wait_timeout`
    /// ([`Error::LockWaitTimeout`] then, and nothing changed).
    ///
    /// Errors: [`Error::TableNotFound`]; [`Error::BulkLoad`] while a bulk
    /// load fills the table; [`Error::SpaceFull`] after about a thousand
    /// drops in one open (their roots wait for the next open); the errors
    /// of any write.
    pub fn drop_table(&self, name: &str) -> Result<()> {
        let e = &self.inner.engine;
        let timeout = lock_wait(e);
        self.inner.catalog.drop_table(e, name, timeout)
    }

    /// Open a table, creating it if needed.
    pub fn table_or_create(&self, name: &str) -> Result<Table> {
        match self.table(name) {
            Err(Error::TableNotFound(_)) => match self.create_table(name) {
                Err(Error::TableExists(_)) => self.table(name),
                r => r,
            },
            r => r,
        }
    }

    /// Start a transaction at the isolation level the
    /// `transaction_isolation` option gives now (see the `txn` module).
    pub fn begin(&self) -> Txn {
        self.begin_with(self.inner.engine.live.isolation())
    }

    /// Start a transaction at isolation level `level`, whatever the
    /// `transaction_isolation` option says.
    pub fn begin_with(&self, level: Isolation) -> Txn {
        Txn::begin(self.inner.trx.clone(), self.inner.clone(), level)
    }

    /// Names of every table, sorted.
    pub fn table_names(&self) -> Result<Vec<String>> {
        self.inner.catalog.names(&self.inner.engine)
    }

    /// Check every tree's invariants (and every page checksum on the way),
    /// the undo lists, every row's version header, and every version chain
    /// a read view could still follow (see `txn::check`).
    pub fn check(&self) -> Result<Vec<(String, TreeStats)>> {
        let e = &*self.inner.engine;
        let mut out = vec![("<catalog>".to_string(), self.inner.catalog.tree.check(e)?)];
        let mut trees = Vec::new();
        for name in self.table_names()? {
            let t = self.table(&name)?;
            out.push((name.clone(), t.check()?));
            trees.push((name, t.tree));
        }
        // The undo lists and every version chain a read view could follow.
        self.inner.trx.check_history(&trees)?;
        Ok(out)
    }

    /// Pages the undo lists hold, the undo directory included, after
    /// checking the lists (page types, links, record framing), and the
    /// overflow pages of the old versions they hold and of large values
    /// in flight, with the overflow directory. With the trees' pages
    /// (their `overflow_pages` included), these are every page in use: for
    /// leak checks.
    #[doc(hidden)]
    pub fn undo_pages(&self) -> Result<u64> {
        let e = &*self.inner.engine;
        let undo = crate::undo::check_space(e, e.space_id())?.map_or(0, |c| c.pages + 1);
        Ok(undo + crate::txn::version::history_chain_pages(e, e.space_id())?)
    }

    /// Write every page changed before this call, sync, and checkpoint (a
    /// sharp checkpoint). Changes other threads make meanwhile are not
    /// waited for, so it ends however busy the database is.
    pub fn flush(&self) -> Result<()> {
        self.inner.engine.flush_and_checkpoint()
    }

    /// [`Db::flush`] with exactly `depth` page writes in flight per batch,
    /// whatever the flushing policy estimates; returns the pages written.
    /// For measuring the flusher at a given queue depth (`keel iobench
    /// --mode flush`), not for applications.
    #[doc(hidden)]
    pub fn flush_at_depth(&self, depth: usize) -> Result<u64> {
        self.inner.engine.flush_at_depth(depth)
    }

    /// Checkpoint as far as the data files and the commits in flight
    /// allow, writing no page (what a page cleaner does after a batch);
    /// true if a checkpoint was written. For tests of the checkpoint
    /// protocol, not for applications.
    #[doc(hidden)]
    pub fn checkpoint(&self) -> Result<bool> {
        self.inner.engine.adm.check_read_only()?;
        self.inner.engine.checkpoint()
    }

    /// Arm failpoint `name` of this database's engine (see
    /// `keel::failpoint`): the next thread to reach it waits there until
    /// the returned hold is released. For tests of races.
    #[doc(hidden)]
    #[cfg(any(test, feature = "test-util"))]
    pub fn failpoint(&self, name: &'static str) -> std::sync::Arc<crate::failpoint::Hold> {
        let e = &self.inner.engine;
        if name.starts_with("log.") {
            // The log's own points: the log has no engine to reach.
            return e.log.failpoints.arm(name);
        }
        e.failpoints.arm(name)
    }

    /// Stop the purge threads for good (until the next open), waiting for
    /// a purge step under way: the history then only grows. For tests that
    /// count pages, which purge would free meanwhile.
    #[doc(hidden)]
    #[cfg(any(test, feature = "test-util"))]
    pub fn stop_purge(&self) {
        self.inner.trx.stop_purge();
    }

    /// Arm failpoint `name` of this database's engine so that the next
    /// thread to reach it panics. For tests of what survives a bug.
    #[doc(hidden)]
    #[cfg(any(test, feature = "test-util"))]
    pub fn failpoint_panic(&self, name: &'static str) -> std::sync::Arc<crate::failpoint::Hold> {
        self.inner.engine.failpoints.arm_panic(name)
    }

    /// Close the database: new writes are refused from now on (on every
    /// clone of this handle: they get [`Error::Closed`]), commits admitted
    /// before (logged, or past the check and about to log) finish, then
    /// the page cleaners stop, every dirty page is written and synced, a
    /// checkpoint is taken, and the directory is unlocked for the next
    /// open. Reopening returns the same data. Dropping the last handle does
    /// the same, but cannot report errors. If the close fails, or gives up
    /// on commits that would not finish, the directory stays locked until
    /// the last handle is dropped.
    pub fn close(self) -> Result<()> {
        self.inner.shutdown()
    }

    /// Write and sync the redo log up to its end (with
    /// `flush_log_at_trx_commit` 0 or 2, commits since the last background
    /// flush become durable now).
    pub fn flush_log(&self) -> Result<()> {
        let log = &self.inner.engine.log;
        log.write_up_to(log.lsn(), true)
    }

    /// Stop as a crash would: the page cleaners stop, nothing more is
    /// written, nothing is flushed, and the directory is unlocked as a
    /// dying process's lock is. For crash tests; the handle (and every
    /// clone, and every table handle) must not be used afterwards.
    #[doc(hidden)]
    pub fn simulate_crash(self) {
        self.inner.engine.adm.close();
        // A crashed process retries nothing: a commit already logged that
        // is retrying a write the dead device keeps failing stops now.
        self.inner.engine.adm.abandon_in_flight();
        // The cleaners first: a crash test holding the coordinator at a
        // failpoint releases it just before this call, and the coordinator
        // must see the stop before its next round. Stopping purge first
        // (joining its threads) could take long enough, on a loaded
        // machine, for an idle round to write every page and move the
        // checkpoint to the end, leaving the test nothing to redo.
        if let Some(mut c) = self.inner.cleaners.lock().take() {
            c.stop(&self.inner.engine.wb);
        }
        self.inner.trx.stop_purge();
        self.inner.engine.release_dir_lock();
        self.inner
            .crashed
            .store(true, std::sync::atomic::Ordering::Release);
    }

    fn handle(&self, name: &str, t: crate::catalog::Entry) -> Table {
        Table {
            sys: self.inner.trx.clone(),
            _db: self.inner.clone(),
            name: name.into(),
            tree: BTree::open(t.root),
            meta: t.meta,
        }
    }
}

/// How long DDL waits for commits inside the table: `lock_wait_timeout`.
pub(crate) fn lock_wait(e: &Engine) -> std::time::Duration {
    e.live.lock_wait_timeout()
}

/// How long closing lets commits already logged finish.
const CLOSE_DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

impl Inner {
    fn shutdown(&self) -> Result<()> {
        let e = &self.engine;
        // Writers waiting for log space on other handles get `Closed` now
        // instead of waiting out their timeout.
        e.adm.close();
        if e.opts.read_only {
            // Nothing to drain, flush or checkpoint: a read-only open wrote
            // nothing. Unlocked now, as a writer's close unlocks after its
            // last write, whatever handles remain.
            e.release_dir_lock();
            return Ok(());
        }
        let Some(mut c) = self.cleaners.lock().take() else {
            return Ok(());
        };
        // Commits admitted before `close` need the cleaners to finish
        // (they may wait for log space): let them, for a while.
        let drained = e.drain_commits(CLOSE_DRAIN_TIMEOUT);
        if !drained {
            log::error!(
                "closing {}: commits still applying after {CLOSE_DRAIN_TIMEOUT:?}; giving up on \
                 them (recovery will finish them at the next open)",
                self.dir.display()
            );
            e.adm.abandon_in_flight();
        }
        // Purge writes pages too: it stops before the cleaners do.
        self.trx.stop_purge();
        e.failpoints.hit("close.cleaners_stopping");
        c.stop(&e.wb);
        e.flush_and_checkpoint()?;
        // An abandoned commit may still change pages, and a page it dirties
        // may still be written: only the engine's drop unlocks then.
        if drained {
            e.release_dir_lock();
        }
        log::info!("closed database in {}", self.dir.display());
        Ok(())
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.crashed.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        if let Err(e) = self.shutdown() {
            log::error!("shutdown of {} failed: {e}", self.dir.display());
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
