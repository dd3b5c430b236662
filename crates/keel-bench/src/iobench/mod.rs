//! `keel iobench`: the device characterization of seed 3 (IObench, fio-style;
//! `docs/field-reports.md` cites it).
//!
//! Random read, random write and mixed random I/O (and sequential streams)
//! at any block size, from 1 to hundreds of concurrent workers, with
//! `O_DIRECT`, `write()+fsync()` or `O_DSYNC`, over one or several files. It
//! goes through the engine's own device layer ([`keel::io`]), so it measures
//! the I/O path the engine uses, throttled device model included.
//!
//! A sweep is the cartesian product of the configured lists
//! ([`IobenchConfig::cases`]); each case runs for `time` after `warmup`.
//! Before anything is written the directory, `O_DIRECT` support, the block
//! alignment and the free space are checked. Each set of data files is
//! written in full (never sparse) once, reused by every case that has its
//! number of files, and removed afterwards unless `keep_files` is set.
//!
//! `flush` measures the engine's own page flusher instead of workers: a
//! database in `dir`, its table held in the buffer pool, random pages
//! dirtied and written with [`keel::Db::flush_at_depth`] at the case's
//! depth (see the `flushcase` module). Where a `wrnd` case has the same
//! block size, threads, files and method, the report gives `flush ÷ wrnd`
//! ([`FlushRatio`]).
//!
//! ```no_run
//! use keel_bench::iobench::{self, IobenchConfig};
//! let config = IobenchConfig { dir: "/data".into(), ..IobenchConfig::default() };
//! let report = iobench::run(&config, &mut |_event| {})?;
//! report.write_json("iobench.json".as_ref())?;
//! iobench::write_html_report(&report, "iobench-report".as_ref())?;
//! # Ok::<(), iobench::IobenchError>(())
//! ```

use std::time::{Duration, Instant};

mod config;
mod error;
mod files;
mod flushcase;
mod output;
mod report;
mod stats;
mod worker;

pub use config::{
    Case, IobenchConfig, Method, Mode, ParseNameError, MAX_BS, MAX_FILES, MAX_THREADS,
};
pub use error::{format_bs, format_size, IobenchError};
pub use files::{available_bytes, logical_block_bytes, per_file_bytes};
pub use flushcase::DEFAULT_DIRTY_PAGES as DEFAULT_FLUSH_DIRTY_PAGES;
pub use output::{
    data_size_note, flush_ratio_table, table_header, table_row, FlushRatio, IobenchReport,
    MachineInfo, JSON_VERSION,
};
pub use report::{render_html, write_html_report};
pub use stats::{CaseResult, FlushFigures, LatencyMs};

use files::FileSet;
use flushcase::FlushDb;
use stats::Tally;
use worker::Plan;

/// What a running sweep reports to its caller, for progress output.
#[derive(Debug)]
#[non_exhaustive]
pub enum Event<'a> {
    /// The checks passed; the sweep starts.
    Start {
        /// Number of cases.
        cases: usize,
        /// Their measurement time, warm-ups included.
        nominal: Duration,
        /// Where it runs.
        machine: &'a MachineInfo,
    },
    /// A set of data files is being prepared.
    Preparing {
        /// Number of files in the set.
        files: usize,
        /// Size of each.
        file_bytes: u64,
    },
    /// The set is ready.
    Prepared {
        /// Number of files in the set.
        files: usize,
        /// Bytes written (0 when kept files were reused).
        written_bytes: u64,
        /// Time it took.
        elapsed: Duration,
    },
    /// `flush`: a database is being created and its table loaded.
    Loading {
        /// Its page size.
        bs: usize,
        /// Its data files.
        files: usize,
        /// The table's size to reach.
        data_bytes: u64,
    },
    /// `flush`: the table is loaded and flushed.
    Loaded {
        /// Rows loaded.
        rows: u64,
        /// Bytes of pages they take.
        data_bytes: u64,
        /// Time it took.
        elapsed: Duration,
    },
    /// A case starts.
    CaseStart {
        /// Its position, from 0.
        index: usize,
        /// Number of cases.
        total: usize,
        /// The case.
        case: Case,
        /// Estimated time left in the sweep, this case included.
        remaining: Duration,
    },
    /// A case is measured.
    CaseDone {
        /// Its position, from 0.
        index: usize,
        /// Number of cases.
        total: usize,
        /// Its figures.
        result: &'a CaseResult,
    },
}

/// Every check that can fail before anything is written: the ranges, the
/// directory, `O_DIRECT` support, the block alignment, the file sizes and the
/// free space.
pub fn check(config: &IobenchConfig) -> Result<(), IobenchError> {
    config.validate()?;
    files::check_dir(&config.dir)?;
    if config.methods.contains(&Method::Direct) {
        files::check_direct(&config.dir)?;
    }
    files::check_alignment(config, files::logical_block_bytes(&config.dir))?;
    files::check_file_sizes(config)?;
    if config.modes.contains(&Mode::Flush) {
        flushcase::check(config, crate::sys::total_ram_bytes())?;
    }
    files::check_space(config)
}

/// Run the whole sweep, telling `observer` how it goes.
pub fn run(
    config: &IobenchConfig,
    observer: &mut dyn FnMut(&Event<'_>),
) -> Result<IobenchReport, IobenchError> {
    check(config)?;
    let machine = MachineInfo::collect(config);
    let cases = config.cases();
    observer(&Event::Start {
        cases: cases.len(),
        nominal: config.nominal_duration(),
        machine: &machine,
    });
    let mut eta = Eta::new(config.warmup + config.time);
    let mut set: Option<FileSet> = None;
    let mut flush_db: Option<FlushDb> = None;
    let mut results: Vec<CaseResult> = Vec::with_capacity(cases.len());
    for (index, case) in cases.iter().enumerate() {
        let total = cases.len();
        let began;
        let result = if case.mode == Mode::Flush {
            let db = match flush_db.take() {
                Some(db) if db.serves(case) => flush_db.insert(db),
                old => {
                    drop(old); // closes and removes the previous database first
                    flush_db.insert(load(config, case, observer)?)
                }
            };
            began = case_start(observer, &eta, index, total, case);
            flushcase::run_case(config, case, db)?
        } else {
            let current = match set.take() {
                Some(s) if s.files() == case.files => set.insert(s),
                old => {
                    drop(old); // removes the previous set first: only one exists
                    set.insert(prepare(config, case.files, observer)?)
                }
            };
            began = case_start(observer, &eta, index, total, case);
            run_case(config, case, current)?
        };
        eta.record(began.elapsed());
        results.push(result);
        link_flush_ratios(&mut results);
        if let Some(result) = results.last() {
            observer(&Event::CaseDone {
                index,
                total,
                result,
            });
        }
    }
    drop(flush_db);
    let flush_vs_wrnd = output::flush_ratios(&results, &config.device.to_string());
    Ok(IobenchReport {
        version: JSON_VERSION,
        machine,
        cases: results,
        flush_vs_wrnd,
    })
}

/// Announce a case; returns when it started.
fn case_start(
    observer: &mut dyn FnMut(&Event<'_>),
    eta: &Eta,
    index: usize,
    total: usize,
    case: &Case,
) -> Instant {
    observer(&Event::CaseStart {
        index,
        total,
        case: *case,
        remaining: eta.remaining(total - index),
    });
    Instant::now()
}

/// Give every `flush` result its ratio to the `wrnd` result of the same
/// block size, threads, files and method, where both ran.
fn link_flush_ratios(results: &mut [CaseResult]) {
    let ratios: Vec<Option<f64>> = results
        .iter()
        .map(|r| output::wrnd_twin(results, r).map(|wrnd| r.iops / wrnd.iops))
        .collect();
    for (r, ratio) in results.iter_mut().zip(ratios) {
        if let Some(figures) = r.flush.as_mut() {
            figures.vs_wrnd = ratio;
        }
    }
}

fn load(
    config: &IobenchConfig,
    case: &Case,
    observer: &mut dyn FnMut(&Event<'_>),
) -> Result<FlushDb, IobenchError> {
    observer(&Event::Loading {
        bs: case.bs,
        files: case.files,
        data_bytes: config.file_size_bytes,
    });
    let began = Instant::now();
    let (db, loaded) = FlushDb::create(config, case)?;
    observer(&Event::Loaded {
        rows: loaded.rows,
        data_bytes: loaded.data_bytes,
        elapsed: began.elapsed(),
    });
    Ok(db)
}

fn prepare(
    config: &IobenchConfig,
    files: usize,
    observer: &mut dyn FnMut(&Event<'_>),
) -> Result<FileSet, IobenchError> {
    observer(&Event::Preparing {
        files,
        file_bytes: per_file_bytes(config.file_size_bytes, files),
    });
    let began = Instant::now();
    let set = FileSet::prepare(config, files)?;
    observer(&Event::Prepared {
        files,
        written_bytes: set.written_bytes,
        elapsed: began.elapsed(),
    });
    Ok(set)
}

/// Measure one case on a prepared file set.
fn run_case(
    config: &IobenchConfig,
    case: &Case,
    set: &FileSet,
) -> Result<CaseResult, IobenchError> {
    let devices = set.open(case.method, &config.device)?;
    set.drop_cache();
    let warm_end = Instant::now() + config.warmup;
    let read_pct = case.mode.read_pct(config.read_pct);
    let plan = Plan {
        case: *case,
        read_pct,
        devices: &devices,
        file_bytes: set.file_bytes(),
        seed: config.seed,
        warm_end,
        end: warm_end + config.time,
    };
    let tally = run_workers(&plan)?;
    let time_s = config.time.as_secs_f64();
    Ok(CaseResult::new(case, read_pct, time_s, &tally))
}

/// Start the plan's workers, wait for them and merge their tallies.
fn run_workers(plan: &Plan<'_>) -> Result<Tally, IobenchError> {
    std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(plan.case.threads);
        let mut spawn_error = None;
        for w in 0..plan.case.threads {
            let spawned = std::thread::Builder::new()
                .name(format!("iobench-{w}"))
                .stack_size(256 << 10)
                .spawn_scoped(scope, move || plan.run(w));
            match spawned {
                Ok(handle) => handles.push(handle),
                Err(e) => {
                    spawn_error = Some(e);
                    break;
                }
            }
        }
        let mut total = Tally::new();
        for handle in handles {
            match handle.join() {
                Ok(tally) => total.merge(&tally),
                Err(payload) => std::panic::resume_unwind(payload),
            }
        }
        match spawn_error {
            Some(e) => Err(IobenchError::io("cannot start a worker thread")(e)),
            None => Ok(total),
        }
    })
}

/// Estimated time left: the nominal time per case, stretched by how much
/// longer the finished cases actually took (thread start-up, files opening,
/// the last requests finishing after the end).
struct Eta {
    nominal: Duration,
    cases_done: u32,
    actual: Duration,
}

impl Eta {
    fn new(nominal: Duration) -> Self {
        Self {
            nominal,
            cases_done: 0,
            actual: Duration::ZERO,
        }
    }

    fn record(&mut self, took: Duration) {
        self.cases_done += 1;
        self.actual += took;
    }

    fn remaining(&self, cases_left: usize) -> Duration {
        let nominal = self.nominal * cases_left as u32;
        if self.cases_done == 0 || self.nominal.is_zero() {
            return nominal;
        }
        let ratio =
            self.actual.as_secs_f64() / (self.nominal.as_secs_f64() * f64::from(self.cases_done));
        nominal.mul_f64(ratio.max(1.0))
    }
}
