//! A plan of one or more runs (`--vary` makes several) on identical data:
//! prepare (or reuse) the tables once, copy them for each run, run, and
//! collect every run into one report. The runs are on Keel or on another
//! engine (`--engine`); Keel's plans may come from a scenario preset
//! (`--preset`), which the report names, and may prepare the tables with
//! other engine options than the runs use (`prepare_sets`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use keel::Options;
use serde::{Deserialize, Serialize};

use super::device_change::check_schedule;
use super::engine::{Database, Engine};
use super::hold_view::check_hold_view;
use super::option_change::check_option_schedule;
use super::params::{apply, same_data, CREATION_OPTIONS};
use super::presets::{Preset, PresetSettings};
use super::runner::Tick;
use super::sample::val;
use super::{
    has_tables, prepare, prewarm, run, DeviceChange, HoldView, Interval, OltpError, OltpParams,
    OptionChange, Summary, VaryAxis,
};

/// What to run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The engine the runs use (Keel unless `--engine` says otherwise).
    /// Other engines take only the options [`Engine::options`] names,
    /// and no preset, prepare options or device changes.
    pub engine: Engine,
    /// The workload parameters (before `vary`).
    pub params: OltpParams,
    /// The engine options (before `vary`), already validated or not.
    pub options: Options,
    /// Each axis multiplies the runs: every combination runs once.
    pub vary: Vec<VaryAxis>,
    /// The data directory. With several runs, each run works on a copy
    /// made next to it (`DIR-run1`, ...) and removed afterwards.
    pub datadir: PathBuf,
    /// Skip prepare when `datadir` already holds the tables.
    pub reuse_data: bool,
    /// Engine options (`key=value`) applied on top of a run's options
    /// while its tables are prepared, e.g. `device=unlimited` to load fast
    /// before measuring on a slow device model. Creation options
    /// (`page_size`, `data_files`, `log_file_size`, `log_files_in_group`)
    /// cannot differ between prepare and run. When non-empty, the run
    /// reopens the directory with its own options after prepare (its pool
    /// starts cold, as every run of a `--vary` plan does).
    pub prepare_sets: Vec<String>,
    /// The scenario preset the plan comes from, if any, and the keys the
    /// command line gave over it (for the report).
    pub preset: Option<(&'static Preset, Vec<String>)>,
    /// Device changes during every run's measurement (`--device-change`),
    /// in time order; each run gets the same schedule.
    pub device_changes: Vec<DeviceChange>,
    /// Option changes during every run's measurement (`--set-at`), in
    /// time order; each run gets the same schedule.
    pub option_changes: Vec<OptionChange>,
    /// A read view held open during every run's measurement
    /// (`--hold-view`): each run gets the same schedule.
    pub hold_view: Option<HoldView>,
}

/// One run as it goes into the JSON file.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunResult {
    /// The run's name: the `--vary` values it used, or the workload.
    pub label: String,
    /// The engine that ran it: `keel`, or the engine a comparison ran
    /// (`innodb`, `sqlite`, ...). Files without it are Keel's.
    #[serde(default = "keel_engine")]
    pub engine: String,
    /// Every effective engine option (for another engine: the settings
    /// Keel's options mapped to, see `docs/engines.md`).
    pub options: serde_json::Map<String, serde_json::Value>,
    /// `io_capacity_max` after the automatic rule (`options` may say 0;
    /// 0 for another engine).
    pub io_capacity_max: u64,
    /// The isolation level the run's transactions ran at, in InnoDB's
    /// spelling (`REPEATABLE-READ`, `READ-COMMITTED`): Keel's
    /// `transaction_isolation` at the start of the run, InnoDB's
    /// `tx_isolation`; absent where the engine's driver does not say (and
    /// in files written before it was recorded).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub isolation: String,
    /// Every workload parameter.
    pub workload: OltpParams,
    /// The run's figures.
    pub summary: Summary,
    /// One element per report interval.
    pub intervals: Vec<Interval>,
    /// The device changes applied during the measurement, with when
    /// (empty without `--device-change`).
    #[serde(default)]
    pub device_changes: Vec<DeviceChange>,
    /// The option changes applied during the measurement, with when
    /// (empty, and absent from the JSON, without `--set-at`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub option_changes: Vec<OptionChange>,
    /// The read view held open during the measurement, with when it was
    /// opened and released (absent from the JSON without `--hold-view`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_view: Option<HoldView>,
    /// Keel's status report at the end of the run (not in the JSON; empty
    /// for another engine).
    #[serde(skip)]
    pub status: String,
}

fn keel_engine() -> String {
    Engine::Keel.name().to_string()
}

/// Every run of a plan.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OltpReport {
    /// Format version of this JSON (1).
    pub version: u32,
    /// The scenario preset's name (`--preset`), absent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// What the preset sets, the seed it reproduces and every key the
    /// command line gave over it; absent without a preset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preset_settings: Option<PresetSettings>,
    /// Engine options used only while preparing the tables (`key=value`);
    /// absent when prepare used the runs' options.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prepare_sets: Vec<String>,
    /// The runs, in the order they ran.
    pub runs: Vec<RunResult>,
}

impl OltpReport {
    fn new(plan: &Plan, runs: Vec<RunResult>) -> OltpReport {
        OltpReport {
            version: 1,
            preset: plan.preset.as_ref().map(|(p, _)| p.name.to_string()),
            preset_settings: plan.preset.as_ref().map(|(p, o)| p.settings(o)),
            prepare_sets: plan.prepare_sets.clone(),
            runs,
        }
    }
}

/// Progress of a plan, for the command line.
#[non_exhaustive]
pub enum Event<'a> {
    /// Loading rows.
    Prepare {
        /// Where.
        dir: &'a Path,
        /// Rows loaded so far.
        rows_done: u64,
        /// Rows to load.
        rows_total: u64,
        /// Seconds since prepare started.
        elapsed_s: f64,
    },
    /// The tables were found in place (`--reuse-data`): no prepare.
    Reused {
        /// Where.
        dir: &'a Path,
    },
    /// A run starts.
    RunStart {
        /// 1-based number of the run.
        index: usize,
        /// Number of runs.
        count: usize,
        /// Its label.
        label: &'a str,
        /// Its parameters.
        params: &'a OltpParams,
        /// Its engine options (Keel's; another engine's mapping is in
        /// `settings`).
        options: &'a Options,
        /// The engine.
        engine: Engine,
        /// The engine's effective settings.
        settings: &'a serde_json::Map<String, serde_json::Value>,
        /// The database, when the engine is Keel (for its metrics).
        keel: Option<&'a keel::Db>,
    },
    /// The tables were read into the buffer pool before the run
    /// (`prewarm`).
    Prewarmed {
        /// Rows and index entries read.
        entries: u64,
        /// Seconds it took.
        elapsed_s: f64,
        /// Free pages left in the buffer pool (0 for another engine).
        free_pages: u64,
        /// Pages in the buffer pool (0 for another engine: not known).
        total_pages: u64,
    },
    /// An interval ended.
    Interval {
        /// Client threads of the run.
        threads: usize,
        /// The interval.
        interval: &'a Interval,
        /// True during the warm-up (the interval is not kept).
        warmup: bool,
    },
    /// The device model changed (`--device-change`).
    DeviceChanged {
        /// The change, with when it was applied.
        change: &'a DeviceChange,
    },
    /// An engine option changed (`--set-at`).
    OptionChanged {
        /// The change, with when it was applied.
        change: &'a OptionChange,
    },
    /// The held read view was opened (`--hold-view`).
    ViewOpened {
        /// The view, with when it was opened.
        view: &'a HoldView,
    },
    /// The held read view was released (`--hold-view`).
    ViewReleased {
        /// The view, with when it was opened and released.
        view: &'a HoldView,
    },
    /// A run ended.
    RunDone {
        /// Its result, with the status report.
        result: &'a RunResult,
    },
}

/// One run of the plan: label, parameters, options.
type RunSpec = (String, OltpParams, Options);

impl Plan {
    /// Every combination of the `vary` values, validated, with the device
    /// changes checked against each and, for another engine than Keel,
    /// every option and axis checked to be one it reads (all before any
    /// work starts, so a bad value fails at once).
    pub fn runs(&self) -> Result<Vec<RunSpec>, OltpError> {
        self.engine.check_built()?;
        self.check_engine_inputs()?;
        let mut runs: Vec<RunSpec> =
            vec![(String::new(), self.params.clone(), self.options.clone())];
        for axis in &self.vary {
            let mut next = Vec::new();
            for (label, p, o) in &runs {
                for v in &axis.values {
                    let (mut p, mut o) = (p.clone(), o.clone());
                    apply(&mut p, &mut o, &axis.key, v)?;
                    let sep = if label.is_empty() { "" } else { " " };
                    next.push((format!("{label}{sep}{}={v}", axis.key), p, o));
                }
            }
            runs = next;
        }
        for (label, p, o) in &mut runs {
            p.validate()?;
            o.validate()?;
            self.prepare_options(o)?.validate()?;
            if label.is_empty() {
                *label = p.workload.to_string();
            }
            check_schedule(&self.device_changes, p, o, label)?;
            check_option_schedule(&self.option_changes, p, o, label)?;
            if let Some(v) = &self.hold_view {
                check_hold_view(v, p, label)?;
            }
            self.engine.check_options(o)?;
        }
        Ok(runs)
    }

    /// Refuse, for another engine than Keel, what only Keel reads.
    fn check_engine_inputs(&self) -> Result<(), OltpError> {
        let e = self.engine;
        if e == Engine::Keel {
            return Ok(());
        }
        let keel_only = |what: &str| {
            OltpError::param(
                "engine",
                format!("{what} applies to Keel only, not to engine {e}"),
            )
        };
        if self.preset.is_some() {
            return Err(keel_only("--preset (a Keel flushing scenario)"));
        }
        if !self.device_changes.is_empty() {
            return Err(keel_only("--device-change"));
        }
        if !self.option_changes.is_empty() {
            return Err(keel_only("--set-at"));
        }
        if self.hold_view.is_some() {
            return Err(keel_only("--hold-view (a read view on Keel's Db)"));
        }
        if !self.prepare_sets.is_empty() {
            return Err(keel_only("--prepare-set"));
        }
        for axis in &self.vary {
            e.check_key(&axis.key)?;
        }
        Ok(())
    }

    /// The options a run with options `o` prepares its tables with.
    fn prepare_options(&self, o: &Options) -> Result<Options, OltpError> {
        let mut p = o.clone();
        p.apply_sets(self.prepare_sets.iter().map(String::as_str))?;
        let (pe, oe) = (p.entries(), o.entries());
        let get = |e: &[(String, String)], k: &str| e.iter().find(|(n, _)| n == k).cloned();
        for k in CREATION_OPTIONS {
            if get(&pe, k) != get(&oe, k) {
                return Err(OltpError::param(
                    *k,
                    "is fixed when the data directory is created: the tables cannot be loaded \
                     with another value than the runs use",
                ));
            }
        }
        Ok(p)
    }
}

/// Run the plan; `on_event` sees progress, interval lines and results.
pub fn run_plan(plan: &Plan, on_event: &mut dyn FnMut(Event<'_>)) -> Result<OltpReport, OltpError> {
    let runs = plan.runs()?;
    let engine = plan.engine;
    if engine.exists(&plan.datadir) && !plan.reuse_data {
        let what = match engine {
            Engine::Keel => "a Keel database".to_string(),
            e => format!("a {e} database"),
        };
        return Err(OltpError::Data(format!(
            "{} already holds {what}: pass --reuse-data to run on its tables, \
             or choose an empty --datadir",
            plan.datadir.display()
        )));
    }
    if let Some(other) = Engine::ALL
        .into_iter()
        .find(|e| *e != engine && e.exists(&plan.datadir))
    {
        return Err(OltpError::Data(format!(
            "{} holds a {other} database, not a {engine} one: choose another --datadir",
            plan.datadir.display()
        )));
    }
    let count = runs.len();
    let mut results = Vec::with_capacity(count);
    if count == 1 {
        let (label, p, o) = &runs[0];
        let db = open_prepared(plan, &plan.datadir, p, o, plan.reuse_data, on_event)?;
        let r = run_one(plan, &*db, (1, count), label, p, o, on_event);
        let closed = db.close();
        results.push(r?);
        closed?;
        return Ok(OltpReport::new(plan, results));
    }
    let (_, p0, o0) = &runs[0];
    open_prepared(plan, &plan.datadir, p0, o0, plan.reuse_data, on_event)?.close()?;
    for (i, (label, p, o)) in runs.iter().enumerate() {
        let dir = run_dir(&plan.datadir, i + 1);
        remove_dir(&dir)?;
        let db = if same_data((p, o), (p0, o0)) {
            copy_dir(&plan.datadir, &dir)?;
            engine.open(&dir, o, p)?
        } else {
            open_prepared(plan, &dir, p, o, false, on_event)?
        };
        let r = run_one(plan, &*db, (i + 1, count), label, p, o, on_event);
        let closed = db.close();
        remove_dir(&dir)?;
        results.push(r?);
        closed?;
    }
    Ok(OltpReport::new(plan, results))
}

/// Open `dir` with the run's options `o`, preparing the tables first
/// unless `reuse` finds them there. Prepare uses `o` plus the plan's
/// `prepare_sets`; when those change anything, the directory is closed
/// after prepare and reopened with `o`.
fn open_prepared(
    plan: &Plan,
    dir: &Path,
    p: &OltpParams,
    o: &Options,
    reuse: bool,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<Box<dyn Database>, OltpError> {
    let engine = plan.engine;
    if reuse {
        let db = engine.open(dir, o, p)?;
        if has_tables(&*db, p)? {
            on_event(Event::Reused { dir });
            return Ok(db);
        }
        db.close()?;
    }
    let prep = plan.prepare_options(o)?;
    let db = engine.open(dir, &prep, p)?;
    let t0 = Instant::now();
    prepare(&*db, p, &mut |rows_done, rows_total| {
        on_event(Event::Prepare {
            dir,
            rows_done,
            rows_total,
            elapsed_s: t0.elapsed().as_secs_f64(),
        })
    })?;
    // Start every run from a clean pool and a fresh checkpoint, as
    // sysbench's runs start after prepare's server has flushed.
    db.flush()?;
    if prep == *o {
        return Ok(db);
    }
    db.close()?;
    engine.open(dir, o, p)
}

fn run_one(
    plan: &Plan,
    db: &dyn Database,
    (index, count): (usize, usize),
    label: &str,
    params: &OltpParams,
    options: &Options,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<RunResult, OltpError> {
    let settings = db.settings();
    let isolation = db.isolation().unwrap_or_default();
    on_event(Event::RunStart {
        index,
        count,
        label,
        params,
        options,
        engine: db.engine(),
        settings: &settings,
        keel: db.keel(),
    });
    if params.prewarm {
        let t = Instant::now();
        let entries = prewarm(db, params)?;
        let m = db.metrics();
        on_event(Event::Prewarmed {
            entries,
            elapsed_s: t.elapsed().as_secs_f64(),
            free_pages: val(&m, "buffer_pool_pages_free"),
            total_pages: val(&m, "buffer_pool_pages_total"),
        });
    }
    let before = db.metrics();
    let t0 = Instant::now();
    let measured = run(
        db,
        params,
        &plan.device_changes,
        &plan.option_changes,
        plan.hold_view.as_ref(),
        &mut |tick| match tick {
            Tick::Interval { interval, warmup } => on_event(Event::Interval {
                threads: params.threads,
                interval,
                warmup,
            }),
            Tick::DeviceChanged(change) => on_event(Event::DeviceChanged { change }),
            Tick::OptionChanged(change) => on_event(Event::OptionChanged { change }),
            Tick::ViewOpened(view) => on_event(Event::ViewOpened { view }),
            Tick::ViewReleased(view) => on_event(Event::ViewReleased { view }),
        },
    )?;
    let keel = db.keel();
    let status = keel.map_or_else(String::new, |k| {
        k.status()
            .with_rates(&before, t0.elapsed().as_secs_f64())
            .to_string()
    });
    let result = RunResult {
        label: label.to_string(),
        engine: db.engine().name().to_string(),
        options: settings,
        io_capacity_max: keel.map_or(0, |k| k.options().effective_io_capacity_max()),
        isolation,
        workload: params.clone(),
        summary: measured.summary,
        intervals: measured.intervals,
        device_changes: measured.device_changes,
        option_changes: measured.option_changes,
        hold_view: measured.hold_view,
        status,
    };
    on_event(Event::RunDone { result: &result });
    Ok(result)
}

/// The directory of run `i`'s copy: `DIR-run{i}` next to `DIR`.
fn run_dir(base: &Path, i: usize) -> PathBuf {
    let mut name = base.file_name().unwrap_or_default().to_os_string();
    name.push(format!("-run{i}"));
    base.with_file_name(name)
}

fn remove_dir(dir: &Path) -> Result<(), OltpError> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(OltpError::Io {
            context: format!("cannot remove {}", dir.display()),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// Copy a closed database directory (recursively).
fn copy_dir(from: &Path, to: &Path) -> Result<(), OltpError> {
    std::fs::create_dir_all(to)
        .map_err(OltpError::io(format!("cannot create {}", to.display())))?;
    let entries = std::fs::read_dir(from)
        .map_err(OltpError::io(format!("cannot read {}", from.display())))?;
    for e in entries {
        let e = e.map_err(OltpError::io(format!("cannot read {}", from.display())))?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            copy_dir(&src, &dst)?;
        } else {
            std::fs::copy(&src, &dst).map_err(OltpError::io(format!(
                "cannot copy {} to {}",
                src.display(),
                dst.display()
            )))?;
        }
    }
    Ok(())
}
