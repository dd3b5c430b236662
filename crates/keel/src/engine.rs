//! The engine's shared state: options, tablespace, buffer pool, redo log,
//! metrics. Everything below the public `Db` handle reaches it through here.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::buffer::{BufferPool, PoolConfig, Wal};
use crate::config::Options;
use crate::error::{Error, Result};
use crate::flush::cleaner::{CleanerHost, LogView};
use crate::flush::doublewrite::{Doublewrite, Geometry};
use crate::io::{FileSystem, FlushMethod, OsFileSystem, ThrottledFileSystem};
use crate::metrics::Metrics;
use crate::page::Lsn;
use crate::redo::format::kind;
use crate::redo::Log;
use crate::space::Tablespace;

/// Space-header page layout (page 0), after the common header.
pub(crate) mod space_header {
    /// Next never-used page number.
    pub const HWM: usize = 32;
    /// First page of the free list (0 = empty; page 0 is never free).
    pub const FREE_HEAD: usize = 36;
    /// Pages on the free list.
    pub const FREE_COUNT: usize = 40;
    /// Root page of the catalog tree.
    pub const CATALOG_ROOT: usize = 44;
    /// On a free page: the next free page.
    pub const FREE_NEXT: usize = 32;
}

/// How long a writer may wait for log space before it gets `LogOverloaded`.
const LOG_WAIT_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a writer in the free check looks at the checkpoint age.
const FREE_CHECK_POLL: Duration = Duration::from_micros(100);

/// A writer waiting in the free check, counted while it waits so the
/// cleaners' sync flush makes room for it.
struct Waiting<'a> {
    engine: &'a Engine,
    need: u64,
}

impl<'a> Waiting<'a> {
    fn new(engine: &'a Engine, need: u64) -> Waiting<'a> {
        engine.waiting_need.fetch_add(need, Ordering::AcqRel);
        engine.waiters.fetch_add(1, Ordering::AcqRel);
        Waiting { engine, need }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.engine
            .waiting_need
            .fetch_sub(self.need, Ordering::AcqRel);
        self.engine.waiters.fetch_sub(1, Ordering::AcqRel);
    }
}

pub(crate) struct Engine {
    pub opts: Options,
    pub pool: BufferPool,
    pub log: Arc<Log>,
    pub metrics: Arc<Metrics>,
    /// Checkpoint age at which writers stop and wait for a sync flush.
    pub free_limit: u64,
    /// InnoDB's marks, for reports and the classic policy.
    pub max_modified_age_async: u64,
    pub max_modified_age_sync: u64,
    /// Torn pages the doublewrite area repaired at open.
    pub torn_pages_repaired: u64,
    /// Set when a logged commit could not be applied to every page: memory
    /// no longer matches an atomic history, so writes are refused until a
    /// restart lets recovery finish the commit from the log.
    poisoned: std::sync::atomic::AtomicBool,
    /// Redo bytes promised to commits that passed the free check and have
    /// not finished applying: admission counts them, so concurrent large
    /// commits cannot overrun the log together.
    reserved: AtomicU64,
    /// Redo bytes writers waiting in the free check need, and how many wait.
    waiting_need: AtomicU64,
    waiters: std::sync::atomic::AtomicUsize,
    last_log_flush_ms: AtomicU64,
    started: Instant,
    /// The policy's limit on the writers' redo rate, as pauses.
    pacer: crate::flush::pacer::Pacer,
}

struct LogWal(Arc<Log>);

impl Wal for LogWal {
    fn flush_up_to(&self, lsn: Lsn) -> Result<()> {
        self.0.write_up_to(lsn, true)
    }
    fn flushed_lsn(&self) -> Lsn {
        self.0.flushed_lsn()
    }
}

impl Engine {
    /// Open or create the files in `dir` and build the pool. Returns the
    /// engine, whether the database was created, and the checkpoint found.
    pub fn open(
        dir: &Path,
        opts: Options,
        fs: Option<Arc<dyn FileSystem>>,
    ) -> Result<(Engine, bool)> {
        opts.validate()?;
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, "create directory", e))?;
        let (data_fs, log_fs) = match fs {
            Some(fs) => (fs.clone(), fs),
            None => default_fs(&opts)?,
        };
        let metrics = Arc::new(Metrics::default());
        let created = !data_fs.exists(&dir.join(crate::space::data_file_name(0)));
        let (space, log) = if created {
            let space = Tablespace::create(
                &*data_fs,
                dir,
                opts.page_size,
                opts.data_files,
                metrics.clone(),
            )?;
            let log = Log::create(
                &*log_fs,
                dir,
                opts.log_file_size,
                opts.log_files_in_group,
                space.creation_id(),
                metrics.clone(),
            )?;
            (space, log)
        } else {
            let space = Tablespace::open(
                &*data_fs,
                dir,
                opts.page_size,
                opts.data_files,
                metrics.clone(),
            )?;
            let (log, _) = Log::open(&*log_fs, dir, space.creation_id(), metrics.clone())?;
            (space, log)
        };
        let log = Arc::new(log);
        let (dblwr, torn_pages_repaired) =
            open_doublewrite(&*data_fs, dir, &opts, &space, created, &metrics)?;
        let cfg = pool_config(&opts);
        let wal: Arc<dyn Wal> = Arc::new(LogWal(log.clone()));
        let pool = BufferPool::new(cfg, Arc::new(space), metrics.clone(), Some(wal), dblwr);
        // InnoDB's limits, from the capacity: a safety margin, the free-check
        // limit 5 % below it, the async and sync marks at 7/8 and 15/16.
        let cap = log.capacity();
        let writer_cap = cap - (cap / 32).max(64 << 10).min(cap / 4);
        let free_limit = writer_cap - writer_cap / 20;
        let engine = Engine {
            opts,
            pool,
            log,
            max_modified_age_async: free_limit / 8 * 7,
            max_modified_age_sync: free_limit / 16 * 15,
            free_limit,
            metrics,
            torn_pages_repaired,
            poisoned: std::sync::atomic::AtomicBool::new(false),
            reserved: AtomicU64::new(0),
            waiting_need: AtomicU64::new(0),
            waiters: std::sync::atomic::AtomicUsize::new(0),
            last_log_flush_ms: AtomicU64::new(0),
            started: Instant::now(),
            pacer: Default::default(),
        };
        Metrics::set(
            &engine.metrics.log_max_modified_age_async,
            engine.max_modified_age_async,
        );
        Metrics::set(
            &engine.metrics.log_max_modified_age_sync,
            engine.max_modified_age_sync,
        );
        Metrics::set(&engine.metrics.log_free_check_limit, engine.free_limit);
        Ok((engine, created))
    }

    pub fn page_size(&self) -> usize {
        self.opts.page_size
    }

    pub fn space_id(&self) -> u32 {
        self.pool.space.space_id()
    }

    /// Current checkpoint age in bytes.
    pub fn checkpoint_age(&self) -> u64 {
        self.log.lsn().saturating_sub(self.log.checkpoint_lsn())
    }

    /// Write a checkpoint at the oldest LSN any change not yet in the data
    /// files (or any commit not yet applied) carries.
    pub fn checkpoint(&self) -> Result<bool> {
        let target = {
            let st = self.log.state.lock();
            let oldest = self.pool.oldest_modification().unwrap_or(st.lsn);
            let in_flight = st.in_flight.keys().next().copied().unwrap_or(st.lsn);
            oldest.min(in_flight).min(st.lsn)
        };
        // Only log that is already durable can be named by a checkpoint;
        // the page writes below the target must be durable too.
        let target = target.min(self.log.flushed_lsn());
        if target <= self.log.checkpoint_lsn() {
            return Ok(false);
        }
        self.pool.space.sync()?;
        self.log.write_checkpoint(target)
    }

    /// The free check: called by a writer holding no latch before it adds
    /// `need` bytes of redo. Past the free-check limit the writer stops and
    /// polls (about every 100 µs, as InnoDB's `log_free_check` does) until
    /// the page cleaners' sync flushing has moved the checkpoint: the stop
    /// the seeds describe. The wait is counted in `log_free_check_waits`
    /// and `buffer_flush_sync_waits`.
    pub fn free_check(&self, need: u64) -> Result<()> {
        if need > self.free_limit / 2 {
            return Err(Error::LogOverloaded(format!(
                "a transaction needing about {need} bytes of redo does not fit in a log of {} bytes; \
                 raise log_file_size or log_files_in_group, or commit in smaller transactions",
                self.log.capacity()
            )));
        }
        if self.try_reserve(need) {
            return Ok(());
        }
        let started = Instant::now();
        Metrics::add(&self.metrics.buffer_flush_sync_waits, 1);
        Metrics::add(&self.metrics.log_free_check_waits, 1);
        let _waiting = Waiting::new(self, need);
        let failures = self.pool.flush_failures();
        let mut polls = 0u64;
        while !self.try_reserve(need) {
            // Waiting is pointless once the cleaners fail or writes are
            // refused: say why instead of waiting for the timeout.
            self.pool.space.check_poisoned()?;
            if self.pool.flush_failures() > failures {
                return Err(Error::LogOverloaded(format!(
                    "the checkpoint cannot advance because the page cleaners failed: {}",
                    self.pool.last_flush_failure()
                )));
            }
            if started.elapsed() > LOG_WAIT_TIMEOUT {
                return Err(Error::LogOverloaded(format!(
                    "checkpoint age {} bytes (+{} reserved) stayed above the limit of {} for {:?}; \
                     the page cleaners cannot write pages back fast enough",
                    self.checkpoint_age(),
                    self.reserved.load(Ordering::Acquire),
                    self.free_limit,
                    LOG_WAIT_TIMEOUT
                )));
            }
            // Ask the cleaners for a sync flush (again every ~1 ms, in case
            // a round started just before this writer began to wait).
            if polls.is_multiple_of(10) {
                self.pool.wake_cleaners();
            }
            polls += 1;
            std::thread::sleep(FREE_CHECK_POLL);
        }
        let us = started.elapsed().as_micros() as u64;
        Metrics::add(&self.metrics.buffer_flush_sync_wait_us_total, us);
        Metrics::add(&self.metrics.log_free_check_wait_us_total, us);
        self.metrics
            .buffer_flush_sync_wait_us_max
            .fetch_max(us, Ordering::Relaxed);
        Ok(())
    }

    /// Pause as the policy's writer rate limit asks (holding no latch).
    fn pace(&self) {
        // Commits must not take the log mutex for a limit nobody set.
        if !self.pacer.is_active() {
            return;
        }
        let pause = self.pacer.delay(self.log.lsn(), Instant::now());
        if !pause.is_zero() {
            std::thread::sleep(pause);
            Metrics::add(
                &self.metrics.buffer_flush_throttle_delay_us_total,
                pause.as_micros() as u64,
            );
        }
    }

    /// Admit `need` bytes if the age plus every admitted reservation stays
    /// under the free-check limit.
    fn try_reserve(&self, need: u64) -> bool {
        let age = self.checkpoint_age();
        self.reserved
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| {
                (age + r + need <= self.free_limit).then_some(r + need)
            })
            .is_ok()
    }

    fn unreserve(&self, need: u64) {
        self.reserved.fetch_sub(need, Ordering::AcqRel);
    }

    /// Start committing a transaction whose logical commit record is
    /// `record`: wait for log space if needed (the only point where a
    /// writer may wait for flushing, holding no latch), append the record,
    /// and register the commit as in flight until its write set is applied.
    pub fn begin_commit(&self, record: &[u8]) -> Result<CommitTicket<'_>> {
        self.pool.space.check_poisoned()?;
        if self.poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned(
                "a committed transaction could not be applied after an I/O error; \
                 restart the engine so that recovery completes it from the redo log"
                    .into(),
            ));
        }
        // Room for the record and the page changes applying it will log:
        // each row changes a leaf of its table and of every index, and a
        // random insert into an index leaf shifts its slot array, so the
        // page-change redo runs to several times the record (measured up
        // to ~6x on the oltp prepare); splits add whole pages.
        let need = 8 * record.len() as u64 + (64 << 10);
        self.pace();
        self.free_check(need)?;
        let appended = self.log.append(kind::TXN_COMMIT, record, |st, end| {
            let start = end - (crate::redo::format::GROUP_HDR + record.len()) as u64;
            *st.in_flight.entry(start).or_insert(0) += 1;
            start
        });
        match appended {
            Ok((_, start)) => Ok(CommitTicket {
                engine: self,
                lsn: start,
                need,
                done: false,
            }),
            Err(e) => {
                self.unreserve(need);
                Err(e)
            }
        }
    }

    /// Make the log durable up to `lsn` as `flush_log_at_trx_commit` asks
    /// (1: write and sync now, with group commit; 2: write now; 0: neither,
    /// the background flush does both about once a second).
    pub fn wait_durable(&self, lsn: Lsn) -> Result<()> {
        match self.opts.flush_log_at_trx_commit {
            1 => self.log.write_up_to(lsn, true),
            2 => self.log.write_up_to(lsn, false),
            _ => Ok(()),
        }
    }

    /// Periodic work of the first page cleaner: once a second write and
    /// sync the log (flush_log_at_trx_commit 0 and 2), and checkpoint.
    pub fn background_tick(&self) -> Result<()> {
        let now = self.started.elapsed().as_millis() as u64;
        if now.saturating_sub(self.last_log_flush_ms.load(Ordering::Relaxed)) >= 1000 {
            self.last_log_flush_ms.store(now, Ordering::Relaxed);
            self.log.write_up_to(self.log.lsn(), true)?;
        }
        self.checkpoint().map(|_| ())
    }

    /// Clean shutdown: every page written, log synced, checkpoint at the
    /// end so that the next open has nothing to recover.
    pub fn shutdown_flush(&self) -> Result<()> {
        self.pool.flush_all()?;
        self.log.write_up_to(self.log.lsn(), true)?;
        self.pool.flush_all()?;
        self.checkpoint().map(|_| ())
    }
}

/// A transaction commit in progress: its logical record is in the redo log
/// at `lsn`, and until `finish` the checkpoint may not move past it (so that
/// recovery re-applies the record if the crash comes before the write set
/// reached every page).
pub(crate) struct CommitTicket<'a> {
    engine: &'a Engine,
    pub lsn: Lsn,
    /// Redo bytes reserved by the free check, returned when the ticket ends.
    need: u64,
    done: bool,
}

impl CommitTicket<'_> {
    /// The write set has been applied to the trees: log that, so recovery
    /// need not re-apply it, and let the checkpoint pass. Returns the LSN
    /// the caller must make durable.
    pub fn finish(mut self) -> Result<Lsn> {
        self.done = true;
        let start = self.lsn;
        let (end, ()) =
            self.engine
                .log
                .append(kind::TXN_APPLIED, &start.to_le_bytes(), |st, _| {
                    release(st, start);
                })?;
        Ok(end)
    }
}

fn release(st: &mut crate::redo::LogState, start: Lsn) {
    if let Some(n) = st.in_flight.get_mut(&start) {
        *n -= 1;
        if *n == 0 {
            st.in_flight.remove(&start);
        }
    }
}

impl Drop for CommitTicket<'_> {
    fn drop(&mut self) {
        self.engine.unreserve(self.need);
        if !self.done {
            // Applying failed half way: keep the record in flight so the
            // checkpoint never passes it; recovery will re-apply it.
            self.engine.poisoned.store(true, Ordering::Release);
            log::error!(
                "commit at LSN {} was not fully applied; writes are refused until a restart re-applies it",
                self.lsn
            );
        }
    }
}

/// Open (or create) the doublewrite files and, after a crash, repair torn
/// pages from them before anything reads a page. The areas then serve this
/// run's flushes, unless `doublewrite` is off.
fn open_doublewrite(
    fs: &dyn FileSystem,
    dir: &Path,
    opts: &Options,
    space: &Tablespace,
    created: bool,
    metrics: &Arc<Metrics>,
) -> Result<(Option<Doublewrite>, u64)> {
    let exists = fs.exists(&dir.join(crate::flush::doublewrite::file_name(0)));
    if !opts.doublewrite && !exists {
        return Ok((None, 0));
    }
    let geometry = Geometry {
        files: opts.doublewrite_files,
        // One area per cleaner and per foreground flusher that may run at once.
        areas: 2 * opts.effective_page_cleaners() + 2,
        pages_per_area: opts.doublewrite_pages,
        page_size: opts.page_size,
    };
    let mut d =
        Doublewrite::open_or_create(fs, dir, geometry, space.creation_id(), metrics.clone())?;
    let mut repaired = 0;
    if !created {
        let rep = d.repair_torn_pages(fs, space)?;
        repaired = rep.pages_restored.len() as u64;
        if repaired > 0 || !rep.areas_skipped.is_empty() {
            log::warn!("doublewrite repair in {}: {rep}", dir.display());
        }
    }
    Ok((opts.doublewrite.then_some(d), repaired))
}

fn pool_config(opts: &Options) -> PoolConfig {
    let instances = opts.effective_instances();
    let frames = (opts.buffer_pool_size / opts.page_size as u64) as usize;
    PoolConfig {
        page_size: opts.page_size,
        frames: frames - frames % instances,
        instances,
        old_blocks_pct: opts.old_blocks_pct,
        old_blocks_time_ms: opts.old_blocks_time,
        write_io_threads: opts.write_io_threads,
        flush_neighbors: opts.flush_neighbors,
        free_wait_timeout: Duration::from_secs(30),
    }
}

impl CleanerHost for Engine {
    fn pool(&self) -> &BufferPool {
        &self.pool
    }
    fn log_view(&self) -> LogView {
        LogView {
            current_lsn: self.log.lsn(),
            checkpoint_lsn: self.log.checkpoint_lsn(),
            flushed_lsn: self.log.flushed_lsn(),
            capacity: self.log.capacity(),
            free_check_limit: self.free_limit,
            max_modified_age_async: self.max_modified_age_async,
            max_modified_age_sync: self.max_modified_age_sync,
            redo_reserved: self.reserved.load(Ordering::Acquire)
                + self.waiting_need.load(Ordering::Acquire),
            free_check_waiters: self.waiters.load(Ordering::Acquire),
        }
    }
    fn flush_list_sample(&self) -> usize {
        // The classic policy caps pages_for_lsn at 2 × io_capacity_max after
        // dividing the count by 3: it never needs more entries than this.
        (6 * self.opts.effective_io_capacity_max() as usize).clamp(1024, 1 << 16)
    }
    fn set_writer_log_rate(&self, rate: Option<f64>) {
        self.pacer.set_rate(rate, self.log.lsn(), Instant::now());
    }
    fn tick(&self, urgent: bool) -> Result<()> {
        if urgent {
            // Redo must be durable before a checkpoint can name it.
            self.log.write_up_to(self.log.lsn(), true)?;
        }
        self.background_tick()
    }
}

/// The file systems the options ask for: data files with `flush_method`,
/// wrapped in the throttled device model unless `device = unlimited`; the
/// redo log with buffered writes and fdatasync (O_DIRECT would need whole
/// aligned blocks for every small commit), or not synced with `nosync`.
pub(crate) fn default_fs(opts: &Options) -> Result<(Arc<dyn FileSystem>, Arc<dyn FileSystem>)> {
    let os: Arc<dyn FileSystem> = Arc::new(OsFileSystem::new(opts.flush_method));
    let log_method = match opts.flush_method {
        FlushMethod::NoSync => FlushMethod::NoSync,
        _ => FlushMethod::Fsync,
    };
    let log_fs: Arc<dyn FileSystem> = Arc::new(OsFileSystem::new(log_method));
    let spec = opts.device_spec()?;
    if spec.is_unlimited() {
        Ok((os, log_fs))
    } else {
        Ok((Arc::new(ThrottledFileSystem::new(os, spec)), log_fs))
    }
}
