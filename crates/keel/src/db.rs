//! The public face: `Db`, `Table`, `Range`.

mod open;

use std::collections::HashMap;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::btree::bulk::BulkLoad;
use crate::btree::{BTree, Cursor, TreeStats};
use crate::config::Options;
use crate::engine::admission::Purpose;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::flush::{Cleaners, Decision};
use crate::io::throttle::ThrottleStats;
use crate::io::{FileSystem, ThrottleSpec, ThrottledFileSystem};
use crate::metrics::Metrics;
use crate::mtr::{mtr_bound, Mtr};
use crate::page::PageId;

/// Page number of the catalog's root (fixed at creation).
const CATALOG_ROOT: u32 = 1;
/// Longest table name in bytes.
const MAX_TABLE_NAME: usize = 255;

pub(crate) struct Inner {
    pub(crate) engine: Arc<Engine>,
    pub(crate) dir: PathBuf,
    pub(crate) catalog: BTree,
    pub(crate) tables: RwLock<HashMap<String, PageId>>,
    pub(crate) ddl: Mutex<()>,
    pub(crate) cleaners: Mutex<Option<Cleaners>>,
    pub(crate) trx_sys: crate::txn::TrxSys,
    pub(crate) crashed: std::sync::atomic::AtomicBool,
}

/// An open database. Cheap to clone; every clone refers to the same engine.
#[derive(Clone)]
pub struct Db {
    pub(crate) inner: Arc<Inner>,
}

/// A handle to one table (a B+tree of byte-string keys and values).
#[derive(Clone)]
pub struct Table {
    pub(crate) inner: Arc<Inner>,
    pub(crate) name: Arc<str>,
    pub(crate) tree: BTree,
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
    /// One process per database: the open locks the directory (its file
    /// `keel.lock`, with `flock`) before it touches any other file, and
    /// holds the lock until [`Db::close`] has written its last page, the
    /// last handle is dropped, or the process ends. A directory that is
    /// open already, in another process or in this one, fails at once with
    /// [`Error::Locked`], naming the holder's pid where known; a lock file
    /// left behind by a process that died does not block. To look at a
    /// database another process has open, read its files without the
    /// engine ([`format`](mod@crate::format): `keel inspect`, `keel check
    /// --read-only`).
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<Db> {
        Self::open_with_fs(dir, opts, None)
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
        let catalog = BTree::open(PageId::new(engine.space_id(), CATALOG_ROOT));
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
        // checkpoint leaves nothing for the next open to redo.
        let finished = open::finish_recovery(&engine, unfinished)
            .and_then(|()| open::finish_bulk_loads(&engine, catalog, created));
        if let Err(e) = finished {
            cleaners.stop(&engine.wb);
            return Err(e);
        }
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
        Ok(Db {
            inner: Arc::new(Inner {
                engine,
                dir,
                catalog,
                tables: RwLock::new(HashMap::new()),
                ddl: Mutex::new(()),
                cleaners: Mutex::new(Some(cleaners)),
                crashed: std::sync::atomic::AtomicBool::new(false),
                trx_sys: crate::txn::TrxSys::default(),
            }),
        })
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
    /// Prometheus's text format until the returned server is dropped; e.g.
    /// `db.serve_metrics("127.0.0.1:9187")`. Port 0 picks a free port
    /// ([`crate::MetricsServer::local_addr`]). Give a loopback address
    /// unless the scraper is on another host: the endpoint has no
    /// authentication. The server reads the metrics only: it outlives a
    /// closed database harmlessly. Needs the `prometheus` cargo feature.
    /// Errors: [`Error::MetricsListen`], naming the address.
    #[cfg(feature = "prometheus")]
    pub fn serve_metrics(&self, addr: &str) -> Result<crate::MetricsServer> {
        crate::MetricsServer::start(Arc::clone(&self.inner.engine.metrics), addr)
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
        check_name(name)?;
        let e = &*self.inner.engine;
        e.adm.check_writable(Purpose::New)?;
        let _ddl = self.inner.ddl.lock();
        if self.inner.catalog.get(e, name.as_bytes())?.is_some() {
            return Err(Error::TableExists(name.to_string()));
        }
        // The root page and the space header page.
        let budget = e.adm.budget(Purpose::New);
        budget.ensure(mtr_bound(2, e.page_size()))?;
        let mut mtr = Mtr::new(e, &budget);
        let tree = BTree::create(&mut mtr)?;
        mtr.commit()?;
        let root = tree.root();
        self.inner
            .catalog
            .put(e, name.as_bytes(), &root.page_no.to_le_bytes())?;
        e.log.write_up_to(e.log.lsn(), true)?;
        self.inner.tables.write().insert(name.to_string(), root);
        Ok(self.handle(name, root))
    }

    /// Open an existing table.
    pub fn table(&self, name: &str) -> Result<Table> {
        if let Some(&root) = self.inner.tables.read().get(name) {
            return Ok(self.handle(name, root));
        }
        let e = &*self.inner.engine;
        let v = self
            .inner
            .catalog
            .get(e, name.as_bytes())?
            .ok_or_else(|| Error::TableNotFound(name.to_string()))?;
        let root = decode_root(e.space_id(), name, &v)?;
        self.inner.tables.write().insert(name.to_string(), root);
        Ok(self.handle(name, root))
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

    /// Names of every table, sorted.
    pub fn table_names(&self) -> Result<Vec<String>> {
        let e = &*self.inner.engine;
        self.inner
            .catalog
            .range(e, Bound::Unbounded, Bound::Unbounded, false)
            .map(|r| r.map(|(k, _)| String::from_utf8_lossy(&k).into_owned()))
            .collect()
    }

    /// Check every tree's invariants (and every page checksum on the way).
    pub fn check(&self) -> Result<Vec<(String, TreeStats)>> {
        let e = &*self.inner.engine;
        let mut out = vec![("<catalog>".to_string(), self.inner.catalog.check(e)?)];
        for name in self.table_names()? {
            let t = self.table(&name)?;
            out.push((name, t.tree.check(e)?));
        }
        Ok(out)
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
        if let Some(mut c) = self.inner.cleaners.lock().take() {
            c.stop(&self.inner.engine.wb);
        }
        self.inner.engine.release_dir_lock();
        self.inner
            .crashed
            .store(true, std::sync::atomic::Ordering::Release);
    }

    fn handle(&self, name: &str, root: PageId) -> Table {
        Table {
            inner: self.inner.clone(),
            name: name.into(),
            tree: BTree::open(root),
        }
    }
}

/// How long closing lets commits already logged finish.
const CLOSE_DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

impl Inner {
    fn shutdown(&self) -> Result<()> {
        let e = &self.engine;
        // Writers waiting for log space on other handles get `Closed` now
        // instead of waiting out their timeout.
        e.adm.close();
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

impl Table {
    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The value stored under `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.tree.get(&self.inner.engine, key)
    }

    /// Insert or replace; returns true if a value was replaced. Runs as a
    /// one-row transaction: waits for the row lock if a transaction holds it.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        crate::txn::autocommit(self, key, Some(value))
    }

    /// Remove `key`; returns true if it existed. Runs as a one-row
    /// transaction: waits for the row lock if a transaction holds it.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        crate::txn::autocommit(self, key, None)
    }

    /// Rows with keys in `range`, in ascending key order.
    pub fn range<'k, R: RangeBounds<&'k [u8]>>(&self, range: R) -> Result<Range<'_>> {
        self.range_dir(range, false)
    }

    /// Rows with keys in `range`, in descending key order.
    pub fn range_rev<'k, R: RangeBounds<&'k [u8]>>(&self, range: R) -> Result<Range<'_>> {
        self.range_dir(range, true)
    }

    fn range_dir<'k, R: RangeBounds<&'k [u8]>>(
        &self,
        range: R,
        reverse: bool,
    ) -> Result<Range<'_>> {
        let own = |b: Bound<&&[u8]>| match b {
            Bound::Included(k) => Bound::Included(k.to_vec()),
            Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
            Bound::Unbounded => Bound::Unbounded,
        };
        let lo = own(range.start_bound());
        let hi = own(range.end_bound());
        Ok(Range {
            cursor: self.tree.range(&self.inner.engine, lo, hi, reverse),
        })
    }

    /// Load `rows` into this table, which must be empty, building its
    /// B+tree bottom-up: each leaf is filled in memory and written once, to
    /// `fill_factor` percent of the page ([`Options::fill_factor`], as
    /// InnoDB's `innodb_fill_factor`), with no descent, no split, no row
    /// lock and no transaction. Returns the rows loaded.
    ///
    /// Keys must be strictly ascending: sort the rows first (a secondary
    /// index is loaded the same way, from its entries sorted). Keys and
    /// values have the limits of [`Table::put`].
    ///
    /// All or nothing: the rows become visible together when the load ends,
    /// and the load is durable when this returns `Ok`, whatever
    /// `flush_log_at_trx_commit` says. A crash before that leaves the table
    /// empty (the next open frees the pages the load had written); so does
    /// an error, which this returns after freeing them, and a close of the
    /// database while the load runs (the load fails with [`Error::Closed`]
    /// and the next open frees its pages). (One exception: if
    /// the final log sync fails, the rows are already visible but may not
    /// survive a crash; the log then refuses every write, as after any
    /// failed sync, until a restart.) Every page is redo-logged; see
    /// `btree::bulk` for the protocol.
    ///
    /// Errors: [`Error::BulkLoad`] if the table is not empty, another bulk
    /// load into it is under way, a key is not greater than the one before,
    /// or rows were written into the table while it loaded (those rows
    /// stay, the loaded ones are discarded); [`Error::KeyTooLarge`],
    /// [`Error::ValueTooLarge`]; and the errors of any write ([`Error::Closed`],
    /// I/O errors). Other tables can be read and written meanwhile; loading
    /// several tables from several threads at once is how to use more than
    /// one core.
    pub fn bulk_load<I, K, V>(&self, rows: I) -> Result<u64>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let e = &*self.inner.engine;
        e.adm.check_writable(Purpose::New)?;
        let fill = e.live.current().fill_factor;
        let mut load = BulkLoad::begin(e, self.tree, &self.name, fill)?;
        for (k, v) in rows {
            load.push(k.as_ref(), v.as_ref())?;
        }
        let (n, lsn) = load.finish()?;
        if lsn > 0 {
            e.log.write_up_to(lsn, true)?;
        }
        Ok(n)
    }

    /// Check this tree's invariants.
    pub fn check(&self) -> Result<TreeStats> {
        self.tree.check(&self.inner.engine)
    }
}

/// An iterator over rows; each item is a (key, value) pair or an I/O or
/// corruption error.
pub struct Range<'t> {
    cursor: Cursor<'t>,
}

impl Iterator for Range<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;
    fn next(&mut self) -> Option<Self::Item> {
        self.cursor.next()
    }
}

fn check_name(name: &str) -> Result<()> {
    let bad = |reason: &str| Error::InvalidTableName {
        name: name.to_string(),
        reason: reason.to_string(),
    };
    if name.is_empty() {
        return Err(bad("empty"));
    }
    if name.len() > MAX_TABLE_NAME {
        return Err(bad("longer than 255 bytes"));
    }
    Ok(())
}

/// A catalog entry's value: the table's root page number. Page 0 (the space
/// header) and the catalog's own root are never a table's root.
pub(crate) fn decode_root(space: u32, name: &str, v: &[u8]) -> Result<PageId> {
    let b: [u8; 4] = v.try_into().map_err(|_| {
        Error::Corruption(format!(
            "catalog entry of table `{name}` is {} bytes, expected 4",
            v.len()
        ))
    })?;
    match u32::from_le_bytes(b) {
        r @ (0 | CATALOG_ROOT) => Err(Error::Corruption(format!(
            "catalog entry of table `{name}` names page {r}, which is no table's root"
        ))),
        r => Ok(PageId::new(space, r)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
