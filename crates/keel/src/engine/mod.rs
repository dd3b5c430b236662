//! The engine's shared state and its wiring: options, tablespace, buffer
//! pool, write-back, redo log, admission, metrics. Everything below the
//! public `Db` handle reaches it through here.
//!
//! - [`admission`]: who may append how much redo, and where writers wait;
//! - [`commit`]: a commit in progress, from its logged record to its
//!   "applied" marker;
//! - [`create`]: the order of a database's creation, and what an open does
//!   with a creation cut short;
//! - this file: opening the files and wiring the parts, checkpoints, the
//!   page cleaners' view of the engine, shutdown.
//!
//! One process per database: [`Engine::open`] locks the directory
//! (`io::lock`) before it opens or creates any other file, and fails at
//! once with `Error::Locked` if someone holds the lock. The engine keeps
//! the lock until [`Engine::release_dir_lock`] (after the last write of a
//! close, or when a simulated crash has stopped every writer) or until it
//! is dropped; a failed open drops it on the way out. A read-only open
//! (`Options::read_only`) takes the lock shared instead, creates nothing,
//! opens every file read-only, skips the doublewrite files, and sets
//! [`Admission::refuse_writes`](admission::Admission::refuse_writes) before
//! anything can start a mini-transaction.

pub(crate) mod admission;
pub(crate) mod commit;
pub(crate) mod create;
pub(crate) mod live;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::buffer::{BufferPool, PoolConfig};
use crate::config::{DoublewriteMode, Options, PageCompression};
use crate::error::{Error, Result};
use crate::flush::cleaner::{CleanerHost, LogView};
use crate::flush::doublewrite::{Doublewrite, Geometry};
use crate::flush::policy::WriterLimit;
use crate::flush::{Wal, WriteBack, WriteConfig};
use crate::io::{
    DirLock, FileSystem, FlushMethod, LockError, OpenMode, OsFileSystem, SetSpecError,
    ThrottleSpec, ThrottledFileSystem, LOCK_FILE,
};
use crate::metrics::Metrics;
use crate::page::Lsn;
use crate::redo::Log;
use crate::space::Tablespace;
use admission::Admission;

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
    /// The undo directory page (`undo`; 0 = none, a space laid out before
    /// undo existed).
    pub const UNDO_DIR: usize = 48;
    /// Roots of dropped tables not yet freed (`catalog`'s module doc):
    /// how many, then their page numbers (u32 each) from `DROPPED_LIST`.
    pub const DROPPED_COUNT: usize = 52;
    /// The last chain id handed out (`lob`): u64, raised by the mtr that
    /// writes each overflow chain's first page.
    pub const CHAIN_SEQ: usize = 56;
    /// The overflow chain directory page (`lob`; 0 = none yet).
    pub const LOB_DIR: usize = 64;
    pub const DROPPED_LIST: usize = 68;
    /// Most roots the list holds: what fits in the smallest page.
    pub const DROPPED_MAX: usize = (4096 - DROPPED_LIST) / 4;
    /// On a free page: the next free page.
    pub const FREE_NEXT: usize = 32;
}

pub(crate) struct Engine {
    /// The options given at open. The ones in `RUNTIME_OPTIONS` may have
    /// changed since: read those from `live`.
    pub opts: Options,
    /// The options in effect, changed by `Db::set_option` ([`live`]).
    pub live: live::Live,
    pub pool: BufferPool,
    pub wb: Arc<WriteBack>,
    pub log: Arc<Log>,
    pub adm: Admission,
    pub metrics: Arc<Metrics>,
    /// InnoDB's marks, for reports and the classic policy.
    pub max_modified_age_async: u64,
    pub max_modified_age_sync: u64,
    /// Torn pages the doublewrite area repaired at open.
    pub torn_pages_repaired: u64,
    /// Truncates so far in this run (`catalog`'s module doc): what a
    /// transaction or a scan notes when it begins.
    pub ddl_epoch: AtomicU64,
    /// The doublewrite mode in effect, and why.
    pub doublewrite: DoublewriteStatus,
    last_log_flush_ms: AtomicU64,
    started: Instant,
    /// Held by whoever computes and writes a checkpoint (see
    /// [`Engine::checkpoint`]).
    checkpointing: parking_lot::Mutex<()>,
    /// Points where tests hold a thread (`crate::failpoint`).
    pub(crate) failpoints: crate::failpoint::Points,
    /// The model the data files go through, for `Db::set_device`.
    device: DeviceModel,
    /// The directory's lock (see the module doc). Last, so that a drop
    /// releases it after everything that could write has gone.
    dir_lock: parking_lot::Mutex<Option<DirLock>>,
}

/// InnoDB's limits, from the log's capacity: a safety margin gives the
/// writers' capacity, the free-check limit lies 5 % below it (and the
/// async and sync marks at 7/8 and 15/16 of the limit).
pub(crate) fn free_check_limit(cap: u64) -> u64 {
    let writer_cap = cap - (cap / 32).max(64 << 10).min(cap / 4);
    writer_cap - writer_cap / 20
}

/// Refuse a redo log of `cap` bytes whose free-check limit cannot hold the
/// largest mini-transaction every database needs
/// ([`admission::MIN_MTR_PAGES`] pages of `page_size` bytes): with it, an
/// open that must finish a bulk load would wait for log space that can
/// never be granted.
pub(crate) fn check_log_fits(cap: u64, page_size: usize) -> Result<()> {
    let limit = free_check_limit(cap);
    let max = admission::max_mtr_pages(limit, page_size);
    if max < admission::MIN_MTR_PAGES {
        return Err(Error::config(
            "log_file_size",
            format!(
                "a redo log of {cap} bytes (log_file_size × log_files_in_group, less the file \
                 headers) lets one mini-transaction log at most {max} pages of {page_size} \
                 bytes (page_size); the engine needs {}: use a larger log or a smaller \
                 page_size",
                admission::MIN_MTR_PAGES
            ),
        ));
    }
    Ok(())
}

/// The file systems an engine opens its files on.
struct FileSystems {
    /// The data files' (and the doublewrite buffer's).
    data: Arc<dyn FileSystem>,
    /// The redo log's.
    log: Arc<dyn FileSystem>,
    /// The model in front of `data`, if any.
    device: DeviceModel,
}

/// What stands between the data files and the disk.
enum DeviceModel {
    /// The throttled model that `device` asked for.
    Throttled(Arc<ThrottledFileSystem>),
    /// `device = unlimited`: the files are unwrapped.
    Unlimited,
    /// `Db::open_with_fs`: the caller's file system, whatever it is.
    Supplied,
}

/// The write-ahead hook on the redo log: a page may reach the data files
/// only once the redo of its newest change is *durable* (synced), not
/// merely written to the OS. Recovery relies on it: redo skips a record
/// when the page LSN is at or past the record's end, and after a crash the
/// log continues from the end of what survived, so a page carrying a change
/// whose redo was lost would keep a half-done mini-transaction and hide
/// later records at the same LSNs. A page whose redo is durable already is
/// written without touching the log's locks (`redo::writer`).
pub(crate) struct LogWal(pub(crate) Arc<Log>);

impl Wal for LogWal {
    fn flush_up_to(&self, lsn: Lsn) -> Result<()> {
        self.0.write_up_to(lsn, true)
    }
    fn flushed_lsn(&self) -> Lsn {
        self.0.flushed_lsn()
    }
}

impl Engine {
    /// Open or create the files in `dir` and build the pool, which checks
    /// every page it reads from disk with `validate` (the B-tree's node
    /// validation, passed down by the caller so that nothing here knows
    /// page layouts). Returns the engine and whether the database was
    /// created.
    pub fn open(
        dir: &Path,
        mut opts: Options,
        fs: Option<Arc<dyn FileSystem>>,
        validate: fn(&[u8]) -> std::result::Result<(), String>,
    ) -> Result<(Engine, bool)> {
        opts.validate()?;
        let FileSystems {
            data: data_fs,
            log: log_fs,
            device,
        } = match fs {
            Some(fs) => FileSystems {
                data: fs.clone(),
                log: fs,
                device: DeviceModel::Supplied,
            },
            None => default_fs(&opts)?,
        };
        let read_only = opts.read_only;
        let (dir_lock, created) = if read_only {
            (lock_read_only(&*data_fs, &*log_fs, dir)?, false)
        } else {
            create_dirs(&*data_fs, dir)?;
            let dir_lock = lock_dir(&*data_fs, dir)?;
            (dir_lock, create::prepare(&*data_fs, &*log_fs, dir)?)
        };
        let metrics = Arc::new(Metrics::default());
        let (space, log) = if created {
            // Refused before any file exists.
            let area = opts
                .log_file_size
                .saturating_sub(crate::redo::format::LOG_FILE_HDR);
            check_log_fits(area * opts.log_files_in_group as u64, opts.page_size)?;
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
            let mode = if read_only {
                OpenMode::ReadOnly
            } else {
                OpenMode::Existing
            };
            let space = Tablespace::open_in(
                &*data_fs,
                dir,
                opts.page_size,
                opts.data_files,
                mode,
                metrics.clone(),
            )?;
            let (log, _) = Log::open(&*log_fs, dir, space.creation_id(), mode, metrics.clone())?;
            // The log keeps the size it was created with: say so rather
            // than let the options claim another, and report the real one.
            let (size, n) = log.geometry();
            if (size, n) != (opts.log_file_size, opts.log_files_in_group) {
                log::warn!(
                    "{}: the redo log has {n} files of {size} bytes; the options ask for \
                     log_file_size = {} and log_files_in_group = {}, which only a new database \
                     takes (Keel does not resize an existing log): the log keeps its size, and \
                     the options in effect say so",
                    dir.display(),
                    opts.log_file_size,
                    opts.log_files_in_group
                );
                opts.log_file_size = size;
                opts.log_files_in_group = n;
            }
            check_log_fits(log.capacity(), opts.page_size)?;
            (space, log)
        };
        let log = Arc::new(log);
        space.set_page_compression(opts.page_compression == PageCompression::Zstd);
        // A read-only open writes no page, and a database it may open (no
        // redo after the checkpoint: `Db::open`) had no page write under
        // way when it stopped, so its doublewrite files hold nothing to
        // repair.
        let (dblwr, torn_pages_repaired, doublewrite) = if read_only {
            let why = "read-only open: no page is written".to_string();
            (None, 0, DoublewriteStatus::new(opts.doublewrite, why))
        } else {
            open_doublewrite(&*data_fs, dir, &opts, &space, created, &metrics)?
        };
        let space = Arc::new(space);
        let wal: Arc<dyn Wal> = Arc::new(LogWal(log.clone()));
        let wb = Arc::new(WriteBack::new(
            space.clone(),
            metrics.clone(),
            wal,
            dblwr,
            WriteConfig {
                write_io_threads: opts.write_io_threads,
                flush_neighbors: opts.flush_neighbors,
            },
        ));
        let pool = BufferPool::new(pool_config(&opts, validate), space.clone(), metrics.clone());
        pool.set_writer(wb.clone());
        let cap = log.capacity();
        let free_limit = free_check_limit(cap);
        let adm = Admission::new(
            log.clone(),
            wb.clone(),
            space,
            metrics.clone(),
            free_limit,
            cap - 4096,
        );
        if read_only {
            adm.refuse_writes(dir);
        }
        let engine = Engine {
            live: live::Live::new(&opts),
            opts,
            pool,
            wb,
            log,
            adm,
            max_modified_age_async: free_limit / 8 * 7,
            max_modified_age_sync: free_limit / 16 * 15,
            metrics,
            torn_pages_repaired,
            ddl_epoch: AtomicU64::new(0),
            doublewrite,
            last_log_flush_ms: AtomicU64::new(0),
            checkpointing: parking_lot::Mutex::new(()),
            failpoints: Default::default(),
            started: Instant::now(),
            device,
            dir_lock: parking_lot::Mutex::new(Some(dir_lock)),
        };
        let m = &engine.metrics;
        Metrics::set(&m.log_max_modified_age_async, engine.max_modified_age_async);
        Metrics::set(&m.log_max_modified_age_sync, engine.max_modified_age_sync);
        Metrics::set(&m.log_free_check_limit, free_limit);
        Ok((engine, created))
    }

    pub fn page_size(&self) -> usize {
        self.opts.page_size
    }

    pub fn space_id(&self) -> u32 {
        self.pool.space.space_id()
    }

    /// Write a checkpoint at the oldest LSN any change not yet in the data
    /// files, or any commit not yet applied, carries. When commits in
    /// flight hold it back, their records are first relocated to the end of
    /// the log (see `redo::inflight`), space permitting.
    ///
    /// One checkpointer at a time (`checkpointing`): a relocation moves the
    /// commits' pins to a group that is not durable yet, and until it is,
    /// the only durable copies of those records are the originals. So the
    /// relocating checkpointer syncs the log through the group before it
    /// reads the bound again, and no other checkpointer may read the bound
    /// in between (it could checkpoint past the originals; a power loss
    /// then loses the records of commits half applied — found by the
    /// power-loss test once `steady` checkpointed after every batch from
    /// several cleaners; the deterministic test holds a relocating
    /// checkpointer at failpoint `checkpoint.relocated`:
    /// `tests/large_transactions.rs`,
    /// `a_checkpoint_cannot_pass_relocated_records_before_they_are_durable`).
    /// Callers (the cleaners, their coordinator,
    /// `Db::flush`) hold no latch, claim or log space while they wait for
    /// the mutex, and its holder waits only for I/O.
    pub fn checkpoint(&self) -> Result<bool> {
        let _one = self.checkpointing.lock();
        self.checkpoint_locked()
    }

    /// [`Engine::checkpoint`], or nothing if another checkpoint is being
    /// written (it covers about the same ground): for the cleaners'
    /// checkpoint after every batch.
    pub fn try_checkpoint(&self) -> Result<bool> {
        match self.checkpointing.try_lock() {
            Some(_one) => self.checkpoint_locked(),
            None => Ok(false),
        }
    }

    fn checkpoint_locked(&self) -> Result<bool> {
        let bound = || {
            self.log
                .checkpoint_bound(|| self.pool.oldest_modification())
        };
        let (pages, mut pin) = bound();
        // Every page clean when the oldest modification was read had its
        // write counted before: these marks cover it (and not the writes
        // completed later, of pages that were still dirty then and so
        // hold `pages` back).
        let marks = self.pool.space.sync_marks();
        // Relocating costs the records' bytes; do it when the pins hold the
        // checkpoint back by more than that is worth.
        let worth = (self.log.capacity() / 64).max(4096);
        if pin.is_some_and(|p| p + worth < pages) {
            let need = self.log.relocation_len() as u64;
            if self.adm.try_reserve_relocation(need) {
                let moved = self.log.relocate_in_flight(need as usize);
                self.adm.release(need);
                if let Some((start, bytes)) = moved? {
                    self.failpoints.hit("checkpoint.relocated");
                    // The pins now point at the group: make it durable
                    // before any checkpoint may pass the originals.
                    self.log.write_up_to(start + bytes as u64, true)?;
                    Metrics::add(&self.metrics.log_relocations, 1);
                    Metrics::add(&self.metrics.log_relocated_bytes, bytes as u64);
                    pin = bound().1;
                }
            }
        }
        // A finished commit's pin holds until its marker is durable
        // (`redo::inflight`): when that is what holds the checkpoint back,
        // sync the log now rather than wait for whoever syncs next (a
        // second at `flush_log_at_trx_commit` 0 when no batch is written).
        if self.log.unsynced_marker_holds_below(pages) {
            self.log.write_up_to(self.log.lsn(), true)?;
            pin = bound().1;
        }
        let target = pin.map_or(pages, |p| p.min(pages));
        // Only log that is already durable can be named by a checkpoint;
        // the page writes below the target must be durable too.
        let target = target.min(self.log.flushed_lsn());
        if target <= self.log.checkpoint_lsn() {
            return Ok(false);
        }
        self.pool.space.sync_up_to(&marks)?;
        self.log.write_checkpoint(target)
    }

    /// Make the log durable up to `lsn` as `flush_log_at_trx_commit` asks
    /// (1: write and sync now, with group commit; 2: write now; 0: neither,
    /// the background flush does both about once a second).
    pub fn wait_durable(&self, lsn: Lsn) -> Result<()> {
        match self.live.flush_log_at_trx_commit() {
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

    /// A sharp checkpoint: write every page changed before this call, sync,
    /// and checkpoint as far as commits in flight allow. Changes made by
    /// other threads meanwhile are not waited for.
    pub fn flush_and_checkpoint(&self) -> Result<()> {
        let end = self.log.lsn();
        self.log.write_up_to(end, true)?;
        self.wb.flush_below(&self.pool, end + 1)?;
        self.checkpoint().map(|_| ())
    }

    /// [`Engine::flush_and_checkpoint`] with exactly `depth` page writes
    /// in flight per batch, whatever the policy estimates: the flusher's
    /// own speed at a given queue depth (`keel iobench --mode flush`).
    /// Returns the pages written, by this call or by a page cleaner
    /// meanwhile.
    pub fn flush_at_depth(&self, depth: usize) -> Result<u64> {
        let written = || self.metrics.buffer_pages_written.load(Ordering::Relaxed);
        let before = written();
        self.wb.pin_io_depth(Some(depth));
        let r = self.flush_and_checkpoint();
        self.wb.pin_io_depth(None);
        r?;
        Ok(written() - before)
    }

    /// The data files' device model, if they have one.
    pub fn device_model(&self) -> Option<&ThrottledFileSystem> {
        match &self.device {
            DeviceModel::Throttled(fs) => Some(fs),
            DeviceModel::Unlimited | DeviceModel::Supplied => None,
        }
    }

    /// Model the data files' device by `spec` from their next request on
    /// (see `Db::set_device`). A bad spec is an `Error::Config` on
    /// `device`; a database without a model, `Error::DeviceNotModelled`.
    pub fn set_device(&self, spec: &str) -> Result<()> {
        let bad = |reason: String| Error::config("device", reason);
        let spec: ThrottleSpec = spec.parse().map_err(|e| bad(format!("{e}")))?;
        let not_modelled = |reason: &str| Error::DeviceNotModelled {
            spec: spec.to_string(),
            reason: reason.to_string(),
        };
        let fs = match &self.device {
            DeviceModel::Throttled(fs) => fs,
            DeviceModel::Unlimited => {
                return Err(not_modelled(
                    "the database was opened with device = unlimited, whose files pass \
                     through unwrapped, so there is no device model to change; open with a \
                     throttled device, e.g. device = nvme",
                ))
            }
            DeviceModel::Supplied => {
                return Err(not_modelled(
                    "the database was opened on a caller-supplied file system \
                     (Db::open_with_fs), which the engine does not model",
                ))
            }
        };
        fs.set_spec(&spec).map_err(|e| match e {
            SetSpecError::Unwrapped => not_modelled(&e.to_string()),
            other => bad(other.to_string()),
        })?;
        log::info!("device model changed to {spec}");
        Ok(())
    }

    /// Unlock the directory, so that another process (or another open in
    /// this one) may open it: once nothing of this engine writes to its
    /// files any more. A second call does nothing.
    pub fn release_dir_lock(&self) {
        drop(self.dir_lock.lock().take());
    }

    /// Wait, up to `timeout`, until no commit admitted is still being
    /// logged or applied (closing lets them finish while the cleaners
    /// still run; see `admission`, "Closing"). Polls: a commit ends by
    /// itself, within its own waits' timeouts, and wakes nobody.
    pub fn drain_commits(&self, timeout: Duration) -> bool {
        let start = Instant::now();
        while self.adm.applying.load(Ordering::SeqCst) > 0 {
            if start.elapsed() > timeout {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }
}

/// Create `dir` if it is missing, and make its name durable (and the name
/// of every directory created above it): a database whose files were
/// synced must not vanish with a directory entry a power loss took.
fn create_dirs(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    let created = fs
        .create_dirs(dir)
        .map_err(|e| Error::io(dir, "create directory", e))?;
    for d in &created {
        if let Some(parent) = d.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs.sync_dir(parent)
                .map_err(|e| Error::io(parent, "sync directory", e))?;
        }
    }
    Ok(())
}

/// For a read-only open: `dir` must hold a database, whose lock it takes
/// shared ([`FileSystem::lock_dir_shared`]); nothing is created.
fn lock_read_only(
    data_fs: &dyn FileSystem,
    log_fs: &dyn FileSystem,
    dir: &Path,
) -> Result<DirLock> {
    let refuse =
        |why: String| Error::ReadOnly(format!("cannot open {} read-only: {why}", dir.display()));
    if !data_fs.exists(&dir.join(crate::space::data_file_name(0))) {
        return Err(refuse(
            "there is no database there, and a read-only open does not create one".into(),
        ));
    }
    let lock = data_fs
        .lock_dir_shared(dir)
        .map_err(|e| lock_error(dir, "lock (shared)", e))?;
    match create::inspect(data_fs, log_fs, dir)? {
        create::Found::Database => Ok(lock),
        create::Found::Nothing => Err(refuse("its first data file is gone".into())),
        create::Found::Unfinished(why) => Err(refuse(format!(
            "its creation did not finish ({why}); an open without read_only creates it again"
        ))),
    }
}

/// Lock `dir` for this process (see the module doc).
fn lock_dir(fs: &dyn FileSystem, dir: &Path) -> Result<DirLock> {
    fs.lock_dir(dir).map_err(|e| lock_error(dir, "lock", e))
}

/// The engine's error for a lock on `dir` not taken by `op`.
fn lock_error(dir: &Path, op: &'static str, e: LockError) -> Error {
    match e {
        LockError::Held { pid } => Error::Locked {
            dir: dir.to_path_buf(),
            pid,
        },
        LockError::Io(e) => Error::io(dir.join(LOCK_FILE), op, e),
    }
}

/// Open (or create) the doublewrite files and, after a crash, repair torn
/// pages from them before anything reads a page, whatever the mode now
/// (copies written under another mode are used all the same; a torn page
/// an entries-only area lists fails the open with `Error::TornPage`). The
/// areas then serve this run's flushes under `on` and `detect_only`; under
/// `off` and `atomic` the files are removed once used (see
/// [`Doublewrite::remove_files`]). `atomic` is refused with an
/// `Error::Config` on `doublewrite` unless every data file's device
/// promises untorn writes of a whole page.
fn open_doublewrite(
    fs: &dyn FileSystem,
    dir: &Path,
    opts: &Options,
    space: &Tablespace,
    created: bool,
    metrics: &Arc<Metrics>,
) -> Result<(Option<Doublewrite>, u64, DoublewriteStatus)> {
    let mode = opts.doublewrite;
    let status = match mode {
        DoublewriteMode::On => DoublewriteStatus::new(
            mode,
            "page images copied before in-place writes; torn pages repaired at recovery".into(),
        ),
        DoublewriteMode::DetectOnly => DoublewriteStatus::new(
            mode,
            "page ids and LSNs only; torn pages detected at recovery, not repaired".into(),
        ),
        DoublewriteMode::Off => DoublewriteStatus::new(
            mode,
            "no protection: a torn page write cannot be repaired or told apart".into(),
        ),
        DoublewriteMode::Atomic => {
            let unit = space.atomic_write_unit().map_err(|(path, why)| {
                Error::config(
                    "doublewrite",
                    format!(
                        "atomic needs a device that promises untorn writes of a whole page \
                         ({} bytes), and {} has none: {why}. Use doublewrite = on (or \
                         detect_only) on this device",
                        opts.page_size,
                        path.display()
                    ),
                )
            })?;
            space.set_atomic_page_writes(true);
            DoublewriteStatus::new(
                mode,
                format!("device promises untorn writes up to {}", unit_text(unit)),
            )
        }
    };
    let exists = fs.exists(&dir.join(crate::flush::doublewrite::file_name(0)));
    if !mode.uses_areas() && !exists {
        return Ok((None, 0, status));
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
    d.set_page_images(mode == DoublewriteMode::On);
    let mut repaired = 0;
    if !created {
        let rep = d.repair_torn_pages(fs, space)?;
        repaired = rep.pages_restored.len() as u64;
        if repaired > 0 || !rep.areas_skipped.is_empty() {
            log::warn!("doublewrite repair in {}: {rep}", dir.display());
        }
    }
    if !mode.uses_areas() {
        d.remove_files(fs)?;
        return Ok((None, repaired, status));
    }
    Ok((Some(d), repaired, status))
}

/// A write unit as people write it: `16 KiB`, `1 MiB`, `512 bytes`.
fn unit_text(n: usize) -> String {
    match n {
        n if n >= 1 << 20 && n.is_multiple_of(1 << 20) => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n.is_multiple_of(1 << 10) => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// The doublewrite mode in effect and why ([`crate::Db::doublewrite`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DoublewriteStatus {
    /// The mode.
    pub mode: DoublewriteMode,
    /// What it does here, e.g. "device promises untorn writes up to 16 KiB".
    pub detail: String,
}

impl DoublewriteStatus {
    fn new(mode: DoublewriteMode, detail: String) -> Self {
        DoublewriteStatus { mode, detail }
    }
}

impl std::fmt::Display for DoublewriteStatus {
    /// `atomic (device promises untorn writes up to 16 KiB)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.mode, self.detail)
    }
}

fn pool_config(
    opts: &Options,
    validate: fn(&[u8]) -> std::result::Result<(), String>,
) -> PoolConfig {
    let instances = opts.effective_instances();
    let frames = (opts.buffer_pool_size / opts.page_size as u64) as usize;
    PoolConfig {
        page_size: opts.page_size,
        frames: frames - frames % instances,
        instances,
        old_blocks_pct: opts.old_blocks_pct,
        old_blocks_time_ms: opts.old_blocks_time,
        free_wait_timeout: Duration::from_secs(30),
        validate,
    }
}

impl CleanerHost for Engine {
    fn pool(&self) -> &BufferPool {
        &self.pool
    }
    fn write_back(&self) -> &WriteBack {
        &self.wb
    }
    fn log_view(&self) -> LogView {
        LogView {
            current_lsn: self.log.lsn(),
            checkpoint_lsn: self.log.checkpoint_lsn(),
            flushed_lsn: self.log.flushed_lsn(),
            capacity: self.log.capacity(),
            free_check_limit: self.adm.free_limit,
            max_modified_age_async: self.max_modified_age_async,
            max_modified_age_sync: self.max_modified_age_sync,
            redo_reserved: self.adm.reserved_and_wanted(),
            redo_reserved_peak: self.adm.take_reserved_peak(),
            free_check_waiters: self.adm.waiters(),
        }
    }
    fn flush_list_sample(&self) -> usize {
        self.live.flush_list_sample()
    }
    fn checkpoint(&self) -> Result<()> {
        Engine::try_checkpoint(self).map(|_| ())
    }
    fn set_writer_limit(&self, limit: Option<WriterLimit>) {
        self.adm.pacer.set_limit(limit);
    }
    fn fresh_policy(&self) -> Box<dyn crate::flush::policy::FlushPolicy> {
        crate::flush::policy::from_options(&self.live.current())
    }
    fn cleaners_failed(&self, why: &str) {
        log::error!("{why}: writes are refused until a restart");
        self.adm
            .poison
            .set(format!("{why}; restart the engine to go on writing"));
    }
    fn tick(&self, urgent: bool) -> Result<()> {
        self.failpoints.hit("cleaner.tick");
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
fn default_fs(opts: &Options) -> Result<FileSystems> {
    let os: Arc<dyn FileSystem> = Arc::new(OsFileSystem::new(opts.flush_method));
    let log_method = match opts.flush_method {
        FlushMethod::NoSync => FlushMethod::NoSync,
        _ => FlushMethod::Fsync,
    };
    let log_fs: Arc<dyn FileSystem> = Arc::new(OsFileSystem::new(log_method));
    let spec = opts.device_spec()?;
    if spec.is_unlimited() {
        Ok(FileSystems {
            data: os,
            log: log_fs,
            device: DeviceModel::Unlimited,
        })
    } else {
        let throttled = Arc::new(ThrottledFileSystem::new(os, spec));
        Ok(FileSystems {
            data: throttled.clone(),
            log: log_fs,
            device: DeviceModel::Throttled(throttled),
        })
    }
}
