//! The engine's shared state: options, tablespace, buffer pool, LSN, metrics.
//! Everything below the public `Db` handle reaches the engine through this.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::buffer::{BufferPool, PoolConfig};
use crate::config::Options;
use crate::error::{Error, Result};
use crate::flush::cleaner::CleanerHost;
use crate::io::{FileSystem, OsFileSystem, ThrottledFileSystem};
use crate::metrics::Metrics;
use crate::space::Tablespace;
use crate::Lsn;

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

pub(crate) struct Engine {
    pub opts: Options,
    pub pool: BufferPool,
    pub metrics: Arc<Metrics>,
    lsn: AtomicU64,
}

impl Engine {
    /// Open or create the files in `dir` and build the pool. Returns the
    /// engine and whether the database was created.
    pub fn open(
        dir: &Path,
        opts: Options,
        fs: Option<Arc<dyn FileSystem>>,
    ) -> Result<(Engine, bool)> {
        opts.validate()?;
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, "create directory", e))?;
        let fs = match fs {
            Some(fs) => fs,
            None => default_fs(&opts)?,
        };
        let metrics = Arc::new(Metrics::default());
        let created = !Tablespace::exists(dir);
        let space = if created {
            Tablespace::create(&*fs, dir, opts.page_size, opts.data_files, metrics.clone())?
        } else {
            Tablespace::open(&*fs, dir, opts.page_size, opts.data_files, metrics.clone())?
        };
        let instances = opts.effective_instances();
        let frames = (opts.buffer_pool_size / opts.page_size as u64) as usize;
        let cfg = PoolConfig {
            page_size: opts.page_size,
            frames: frames - frames % instances,
            instances,
            old_blocks_pct: opts.old_blocks_pct,
            old_blocks_time_ms: opts.old_blocks_time,
            write_io_threads: opts.write_io_threads,
            free_wait_timeout: Duration::from_secs(30),
        };
        let pool = BufferPool::new(cfg, Arc::new(space), metrics.clone());
        let engine = Engine {
            opts,
            pool,
            metrics,
            lsn: AtomicU64::new(1),
        };
        Ok((engine, created))
    }

    pub fn page_size(&self) -> usize {
        self.opts.page_size
    }

    pub fn space_id(&self) -> u32 {
        self.pool.space.space_id()
    }

    /// Advance the LSN by `bytes` and return the new end. Until the redo log
    /// exists this is a counter; the log will hand out the same positions.
    pub fn advance_lsn(&self, bytes: u64) -> Lsn {
        let end = self.lsn.fetch_add(bytes, Ordering::AcqRel) + bytes;
        Metrics::set(&self.metrics.log_lsn_current, end);
        end
    }

    /// Resume LSNs after the largest page LSN seen (so they stay monotonic).
    pub fn bump_lsn_to(&self, lsn: Lsn) {
        self.lsn.fetch_max(lsn, Ordering::AcqRel);
    }
}

impl CleanerHost for Engine {
    fn pool(&self) -> &BufferPool {
        &self.pool
    }
    fn current_lsn(&self) -> Lsn {
        self.lsn.load(Ordering::Acquire)
    }
    fn lru_scan_depth(&self) -> usize {
        self.opts.lru_scan_depth
    }
    fn max_dirty_pages_pct(&self) -> f64 {
        self.opts.max_dirty_pages_pct
    }
}

/// The file system the options ask for: real files with `flush_method`,
/// wrapped in the throttled device model unless `device = unlimited`.
pub(crate) fn default_fs(opts: &Options) -> Result<Arc<dyn FileSystem>> {
    let os: Arc<dyn FileSystem> = Arc::new(OsFileSystem::new(opts.flush_method));
    let spec = opts.device_spec()?;
    if spec.is_unlimited() {
        Ok(os)
    } else {
        Ok(Arc::new(ThrottledFileSystem::new(os, spec)))
    }
}
