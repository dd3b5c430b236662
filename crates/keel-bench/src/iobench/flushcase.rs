//! `--mode flush`: the engine's own page flusher, measured like a device.
//!
//! The `steady` policy must reach at least 90 % of the random-write IOPS
//! that `wrnd` measures for the same device model at the same queue depth;
//! this mode measures the flusher the same way, so the two stand side by
//! side (`flush ÷ wrnd`, see [`super::FlushRatio`]).
//!
//! # One database per (block size, files, method)
//! A [`FlushDb`] is created in a fresh subdirectory of `--dir`
//! (`keel-iobench-flush-<pid>`, removed afterwards, `--keep-files` or
//! not) with:
//! - `page_size` = the case's block size (a power of two from 4 KiB to
//!   64 KiB, checked by [`validate`]), `data_files` = its files,
//!   `flush_method` = its method, `device` = `--device`;
//! - `flush_policy = steady`, `flush_neighbors = 0`, `doublewrite` as
//!   `--doublewrite` says (off by default);
//! - a buffer pool of 1.5 × `--file-size` + 32 MiB, so that the table stays
//!   in memory (nothing is read or evicted while it is measured; the RAM is
//!   checked first, see [`check`]);
//! - two redo log files large enough that a round's redo stays far below
//!   the free-check limit (and below `steady`'s free-running level, where
//!   neither the writers nor the flush-list flushing of the cleaners are
//!   held to anything): each at least half the table and 8 rounds of
//!   updates, at most 1 GiB;
//! - `flush_log_at_trx_commit = 2`: commits are not synced one by one; the
//!   log is synced (untimed) before every timed flush.
//!
//! A table of 8-byte keys and values of a quarter page less 32 bytes
//! (about two rows a leaf) is loaded in key order until its pages take at
//! least `--file-size`, with the device model switched off
//! ([`keel::Db::set_device`] to `unlimited`), then flushed, untimed. Cases
//! that differ only in `threads` share the database.
//!
//! # One case
//! Rounds until the timed flush calls add up to `--warmup` (not counted),
//! then until they add up to `--time`:
//! 1. **dirty** (untimed): update random rows, spread uniformly over the
//!    whole table, at most 64 to a transaction, until the buffer pool
//!    holds `min(flush_dirty_pages, table pages / 8)` dirty pages (4096
//!    by default: enough that the flush's per-batch costs are amortized as
//!    in a real backlog; the eighth keeps the pages scattered, so that
//!    few of them are contiguous); then sync the log, and set the device
//!    model to `--device` afresh: its token buckets restart empty, so the
//!    up to 2 ms of credit ([`keel::io::throttle::CATCH_UP`]) they would
//!    have saved while the device idled is not spent as a burst (`wrnd`'s
//!    workers never let the device idle);
//! 2. **flush** (timed): [`keel::Db::flush_at_depth`]`(threads)` writes
//!    every dirty page, in batches with exactly `threads` page writes in
//!    flight, syncs the data files and checkpoints.
//!
//! IOPS = pages written by the timed calls / seconds of the timed calls.
//! Page cleaners keep running (`steady`); with the table in memory and the
//! checkpoint age far below the setpoint they have little to do, but a
//! page one of them writes *during* a timed call is counted (the call
//! returns the pages written meanwhile by anyone) and its time is the
//! call's; a page one writes *between* a round's dirtying and its call is
//! neither counted nor timed, and is reported as
//! [`FlushFigures::uncounted_cleaner_pages`]. (The depth is pinned for
//! every batch while the call runs, so a cleaner's batch beside the call's
//! would put up to twice `threads` writes in flight; in practice they
//! write nothing at this age, which the figures show.) A case whose table
//! did not stay in the pool (pages read back) is logged as a warning.
//!
//! The flusher writes a run of contiguous dirty pages with one call, so
//! pages per second may exceed write calls per second; both are reported
//! ([`FlushFigures::write_requests_per_s`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use keel::{Db, FlushPolicyName, Metrics, Options};
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};

use super::stats::{CaseResult, FlushFigures, LatencyMs};
use super::{format_bs, Case, IobenchConfig, IobenchError, Method, Mode};

/// Most pages dirtied before each timed flush (the config's default).
pub const DEFAULT_DIRTY_PAGES: usize = 4096;
/// At most one page in this many of the table's is dirtied per round.
const DIRTY_SHARE: u64 = 8;
/// Smallest and largest page size the engine accepts (`page_size`).
const MIN_PAGE: usize = 4096;
const MAX_PAGE: usize = 65536;
/// Most data files the engine accepts (`data_files`).
const MAX_DATA_FILES: usize = 64;
/// Rows per transaction when loading and when dirtying.
const TXN_ROWS: u64 = 64;
/// The table's name.
const TABLE: &str = "iobench_flush";
/// The pool may take at most this share of the RAM.
const MAX_RAM_SHARE: f64 = 0.75;

/// Check what needs no file system: page sizes and file counts the engine
/// accepts, and a dirty batch of at least one page.
pub(super) fn validate(config: &IobenchConfig) -> Result<(), IobenchError> {
    let bad = |msg: String| Err(IobenchError::Config(msg));
    if let Some(&bs) = config
        .block_sizes
        .iter()
        .find(|&&bs| !(MIN_PAGE..=MAX_PAGE).contains(&bs) || !bs.is_power_of_two())
    {
        return bad(format!(
            "--bs {} cannot be used with --mode flush: it is the engine's page_size, which \
             must be a power of two from 4k to 64k (4k, 8k, 16k, 32k, 64k)",
            format_bs(bs)
        ));
    }
    if let Some(&f) = config.files.iter().find(|&&f| f > MAX_DATA_FILES) {
        return bad(format!(
            "--files {f} cannot be used with --mode flush: it is the engine's data_files, \
             at most {MAX_DATA_FILES}"
        ));
    }
    if config.flush_dirty_pages == 0 {
        return bad("the flush mode's dirty pages per round must be at least 1".to_owned());
    }
    Ok(())
}

/// The buffer pool that holds a table of `data_bytes` whole.
fn pool_bytes(data_bytes: u64) -> u64 {
    data_bytes + data_bytes / 2 + (32 << 20)
}

/// Pages dirtied per round for a table of `pages` pages.
fn dirty_pages(config: &IobenchConfig, pages: u64) -> usize {
    let share = usize::try_from(pages / DIRTY_SHARE).unwrap_or(usize::MAX);
    config.flush_dirty_pages.min(share).max(1)
}

/// Size of each of the two redo log files.
fn log_file_bytes(config: &IobenchConfig, bs: usize) -> u64 {
    let round = config.flush_dirty_pages as u64 * (bs as u64 / 4 + 256);
    let want = (config.file_size_bytes / 2).max(8 * round);
    want.next_power_of_two().clamp(8 << 20, 1 << 30)
}

/// Bytes the largest flush database of the sweep may take on disk (data,
/// growth by extents, log, doublewrite files).
pub(super) fn disk_bytes(config: &IobenchConfig) -> u64 {
    let bs = config.block_sizes.iter().copied().max().unwrap_or(MAX_PAGE) as u64;
    let data = config.file_size_bytes + config.file_size_bytes / 8 + 8 * 256 * bs;
    let log = 2 * log_file_bytes(config, bs as usize);
    // At most 4 cleaners (8 instances), 2 areas each plus 2, 128 pages.
    let doublewrite = 10 * 128 * bs;
    data + log + doublewrite
}

/// Fail before anything is written if the table would not fit in the pool
/// the RAM allows.
pub(super) fn check(config: &IobenchConfig, ram_bytes: Option<u64>) -> Result<(), IobenchError> {
    let Some(ram) = ram_bytes else {
        return Ok(());
    };
    let pool = pool_bytes(config.file_size_bytes);
    let limit = (ram as f64 * MAX_RAM_SHARE) as u64;
    if pool > limit {
        return Err(IobenchError::NotEnoughMemory {
            file_size_bytes: config.file_size_bytes,
            pool_bytes: pool,
            limit_bytes: limit,
            ram_bytes: ram,
        });
    }
    Ok(())
}

/// The engine's options for a flush case (see the module documentation).
pub(super) fn options(config: &IobenchConfig, case: &Case) -> Result<Options, IobenchError> {
    let options = Options {
        page_size: case.bs,
        data_files: case.files,
        flush_method: case.method.flush_method(),
        device: config.device.to_string(),
        flush_policy: FlushPolicyName::Steady,
        buffer_pool_size: pool_bytes(config.file_size_bytes),
        log_file_size: log_file_bytes(config, case.bs),
        log_files_in_group: 2,
        flush_log_at_trx_commit: 2,
        flush_neighbors: keel::NeighborMode::Off.into(),
        doublewrite: keel::DoublewriteMode::from_bool(config.doublewrite),
        ..Options::default()
    };
    options.validate().map_err(IobenchError::engine(format!(
        "the engine refuses the options of {case}"
    )))?;
    Ok(options)
}

/// A gauge or counter of the engine.
fn read(counter: &std::sync::atomic::AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

/// The database a run of flush cases shares: created and loaded by
/// [`FlushDb::create`], closed and removed on drop.
pub(super) struct FlushDb {
    db: Option<Db>,
    dir: PathBuf,
    bs: usize,
    files: usize,
    method: Method,
    /// The device model's spec, `None` when unlimited.
    device: Option<String>,
    rows: u64,
    value_len: usize,
    data_bytes: u64,
    dirty_pages: usize,
    /// Rounds run so far (stamped into the values, so each update changes
    /// the row).
    rounds: u64,
}

/// What [`FlushDb::create`] reports.
pub(super) struct Loaded {
    pub rows: u64,
    pub data_bytes: u64,
}

impl FlushDb {
    /// Whether `case` can be measured on this database.
    pub fn serves(&self, case: &Case) -> bool {
        case.mode == Mode::Flush
            && (case.bs, case.files, case.method) == (self.bs, self.files, self.method)
    }

    /// Create the database for `case` in a fresh subdirectory of the
    /// config's directory, load its table and flush it.
    pub fn create(config: &IobenchConfig, case: &Case) -> Result<(Self, Loaded), IobenchError> {
        let options = options(config, case)?;
        let dir = config
            .dir
            .join(format!("keel-iobench-flush-{}", std::process::id()));
        std::fs::create_dir(&dir).map_err(IobenchError::io(format!(
            "cannot create the flush database's directory {}",
            dir.display()
        )))?;
        let what = |doing: &str| format!("{doing} the flush database in {}", dir.display());
        let db = match Db::open(&dir, options) {
            Ok(db) => db,
            Err(e) => {
                remove_dir(&dir);
                return Err(IobenchError::engine(what("cannot create"))(e));
            }
        };
        let mut fdb = FlushDb {
            db: Some(db),
            dir: dir.clone(),
            bs: case.bs,
            files: case.files,
            method: case.method,
            device: (!config.device.is_unlimited()).then(|| config.device.to_string()),
            rows: 0,
            value_len: case.bs / 4 - 32,
            data_bytes: 0,
            dirty_pages: 1,
            rounds: 0,
        };
        // From here on, dropping `fdb` closes and removes the database.
        fdb.load(config)
            .map_err(IobenchError::engine(what("cannot load")))?;
        let pages = fdb.data_bytes / case.bs as u64;
        fdb.dirty_pages = dirty_pages(config, pages);
        let loaded = Loaded {
            rows: fdb.rows,
            data_bytes: fdb.data_bytes,
        };
        Ok((fdb, loaded))
    }

    fn db(&self) -> &Db {
        // `db` is only taken by `drop`.
        self.db
            .as_ref()
            .unwrap_or_else(|| unreachable!("the flush database is open until dropped"))
    }

    fn metrics(&self) -> &Metrics {
        self.db().metrics()
    }

    /// Load rows in key order, device model off, until the pages take
    /// `--file-size`; then flush.
    fn load(&mut self, config: &IobenchConfig) -> keel::Result<()> {
        let db = self.db().clone();
        if self.device.is_some() {
            db.set_device("unlimited")?;
        }
        let table = db.create_table(TABLE)?;
        let mut value = vec![0u8; self.value_len];
        SmallRng::seed_from_u64(config.seed).fill_bytes(&mut value);
        let ps = self.bs as u64;
        let mut rows = 0u64;
        while read(&db.metrics().buffer_pool_pages_data) * ps < config.file_size_bytes {
            let mut tx = db.begin();
            for key in rows..rows + TXN_ROWS {
                tx.put(&table, &key.to_be_bytes(), &value)?;
            }
            tx.commit()?;
            rows += TXN_ROWS;
        }
        db.flush()?;
        self.rows = rows;
        self.data_bytes = read(&db.metrics().buffer_pool_pages_data) * ps;
        Ok(())
    }

    /// Step 1 of a round: dirty about `dirty_pages` random pages, then sync
    /// the log.
    fn dirty(&mut self, rng: &mut SmallRng) -> keel::Result<()> {
        let db = self.db().clone();
        let table = db.table(TABLE)?;
        self.rounds += 1;
        let mut value = vec![0u8; self.value_len];
        rng.fill_bytes(&mut value);
        value[..8].copy_from_slice(&self.rounds.to_be_bytes());
        let target = self.dirty_pages as u64;
        // Enough updates for any table: most rounds need about `target`.
        let most = 16 * target + 4 * TXN_ROWS;
        let mut updated = 0;
        loop {
            let dirty = read(&db.metrics().buffer_pool_pages_dirty);
            if dirty >= target || updated >= most {
                break;
            }
            // No more rows than pages still wanted: one row dirties at
            // most one page (its leaf).
            let rows = (target - dirty).min(TXN_ROWS);
            let mut tx = db.begin();
            for _ in 0..rows {
                let key = rng.gen_range(0..self.rows);
                tx.put(&table, &key.to_be_bytes(), &value)?;
            }
            tx.commit()?;
            updated += rows;
        }
        db.flush_log()
    }

    /// One round: dirty (untimed), then the timed flush.
    fn round(&mut self, depth: usize, rng: &mut SmallRng) -> keel::Result<Round> {
        let before_dirty = read(&self.metrics().buffer_pages_written);
        self.dirty(rng)?;
        if let Some(spec) = &self.device {
            // Its token buckets restart empty: no credit saved while the
            // device idled during the dirtying becomes a burst (a device
            // with a backlog has none).
            self.db().set_device(spec)?;
        }
        let m = self.metrics();
        let (before, calls, call_us, busy_us) = (
            read(&m.buffer_pages_written),
            read(&m.os_data_writes),
            read(&m.os_data_write_us_total),
            read(&m.os_data_write_busy_us_total),
        );
        let start = Instant::now();
        let pages = self.db().flush_at_depth(depth)?;
        let time = start.elapsed();
        let m = self.metrics();
        Ok(Round {
            pages,
            time,
            write_calls: read(&m.os_data_writes) - calls,
            write_us: read(&m.os_data_write_us_total) - call_us,
            busy_us: read(&m.os_data_write_busy_us_total) - busy_us,
            uncounted: before - before_dirty,
        })
    }
}

impl Drop for FlushDb {
    fn drop(&mut self) {
        if let Some(db) = self.db.take() {
            if let Err(e) = db.close() {
                log::warn!("closing the flush database in {}: {e}", self.dir.display());
            }
        }
        remove_dir(&self.dir);
    }
}

fn remove_dir(dir: &Path) {
    if let Err(e) = std::fs::remove_dir_all(dir) {
        log::warn!("cannot remove {}: {e}", dir.display());
    }
}

/// What one round measured.
#[derive(Default)]
struct Round {
    pages: u64,
    time: Duration,
    write_calls: u64,
    write_us: u64,
    busy_us: u64,
    uncounted: u64,
}

impl Round {
    fn add(&mut self, other: &Round) {
        self.pages += other.pages;
        self.time += other.time;
        self.write_calls += other.write_calls;
        self.write_us += other.write_us;
        self.busy_us += other.busy_us;
        self.uncounted += other.uncounted;
    }
}

/// Measure one flush case on `fdb` (which [`FlushDb::serves`] it).
pub(super) fn run_case(
    config: &IobenchConfig,
    case: &Case,
    fdb: &mut FlushDb,
) -> Result<CaseResult, IobenchError> {
    let err = format!(
        "the flush case failed ({case}, database in {})",
        fdb.dir.display()
    );
    let reads = read(&fdb.metrics().buffer_pool_reads);
    let mut rng = SmallRng::seed_from_u64(config.seed ^ (case.threads as u64).rotate_left(32));
    let mut warm = Duration::ZERO;
    while warm < config.warmup {
        let r = fdb
            .round(case.threads, &mut rng)
            .map_err(IobenchError::engine(err.clone()))?;
        warm += r.time;
    }
    let mut total = Round::default();
    let mut rounds = 0;
    while rounds == 0 || total.time < config.time {
        let r = fdb
            .round(case.threads, &mut rng)
            .map_err(IobenchError::engine(err.clone()))?;
        total.add(&r);
        rounds += 1;
    }
    let misses = read(&fdb.metrics().buffer_pool_reads) - reads;
    if misses > 0 {
        log::warn!(
            "{case}: {misses} pages were read back into the buffer pool: the table did not \
             stay in memory, and the dirtying was slower (the timed flushes are not affected)"
        );
    }
    Ok(result(config, case, fdb, &total, rounds))
}

fn result(
    config: &IobenchConfig,
    case: &Case,
    fdb: &FlushDb,
    total: &Round,
    rounds: u64,
) -> CaseResult {
    let time_s = total.time.as_secs_f64().max(1e-9);
    let iops = total.pages as f64 / time_s;
    let avg_ms = if total.write_calls > 0 {
        total.write_us as f64 / total.write_calls as f64 / 1e3
    } else {
        0.0
    };
    CaseResult {
        mode: Mode::Flush,
        bs: case.bs,
        threads: case.threads,
        files: case.files,
        method: case.method,
        read_pct: 0,
        time_s,
        iops,
        mib_s: iops * case.bs as f64 / (1u64 << 20) as f64,
        lat_ms: LatencyMs {
            avg: avg_ms,
            ..LatencyMs::default()
        },
        reads: 0,
        writes: total.pages,
        errors: 0,
        first_error: None,
        flush: Some(FlushFigures {
            depth: case.threads,
            doublewrite: config.doublewrite,
            dirty_pages_per_round: fdb.dirty_pages,
            rounds,
            write_requests: total.write_calls,
            write_requests_per_s: total.write_calls as f64 / time_s,
            mean_writes_in_flight: total.write_us as f64 / 1e6 / time_s,
            busy_share: total.busy_us as f64 / 1e6 / time_s,
            uncounted_cleaner_pages: total.uncounted,
            table_rows: fdb.rows,
            data_bytes: fdb.data_bytes,
            vs_wrnd: None,
        }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn page_sizes_and_files_the_engine_refuses_are_named() {
        let mut config = IobenchConfig {
            modes: vec![Mode::Flush],
            block_sizes: vec![16384, 12288],
            ..IobenchConfig::default()
        };
        let err = validate(&config).unwrap_err().to_string();
        assert!(
            err.contains("--bs 12k") && err.contains("page_size"),
            "{err}"
        );
        config.block_sizes = vec![4096, 65536];
        validate(&config).unwrap();
        config.files = vec![65];
        let err = validate(&config).unwrap_err().to_string();
        assert!(
            err.contains("--files 65") && err.contains("data_files"),
            "{err}"
        );
    }

    #[test]
    fn sizes_follow_the_table() {
        let config = IobenchConfig {
            file_size_bytes: 256 << 20,
            ..IobenchConfig::default()
        };
        // 16384 pages of 16 KiB: an eighth of them, 2048, per round.
        assert_eq!(dirty_pages(&config, 16384), 2048);
        assert_eq!(dirty_pages(&config, 1 << 20), DEFAULT_DIRTY_PAGES);
        assert_eq!(dirty_pages(&config, 3), 1);
        // 8 rounds of 4096 pages of updates (4 KiB values) outweigh half the table.
        assert_eq!(log_file_bytes(&config, 16384), 256 << 20);
        let options = options(
            &config,
            &Case {
                mode: Mode::Flush,
                bs: 16384,
                threads: 4,
                files: 2,
                method: Method::Direct,
            },
        )
        .unwrap();
        assert_eq!((options.page_size, options.data_files), (16384, 2));
        assert_eq!(options.doublewrite, keel::DoublewriteMode::Off);
        assert!(options.buffer_pool_size > 256 << 20);
        let err = check(&config, Some(256 << 20)).unwrap_err().to_string();
        assert!(err.contains("--file-size 256 MiB"), "{err}");
        check(&config, Some(16 << 30)).unwrap();
    }
}
