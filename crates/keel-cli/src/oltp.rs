//! `keel bench oltp`: sysbench's OLTP workloads over the engine (or, with
//! `--engine`, over another embedded engine through the same driver), with
//! a line per report interval, the engine status at the end, and JSON, CSV
//! and an HTML report. The work is in `keel_bench::oltp`; this file parses
//! the flags and prints.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, Result};
use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::Args;
use keel::{FlushPolicyName, Options};
use keel_bench::cgroup::Throttle;
use keel_bench::oltp::{
    self, DeviceChange, Engine, Event, HoldView, OltpParams, OltpReport, OptionChange, Plan,
    RandType, RunResult, Workload,
};

use crate::engine_args::EngineArgs;
use crate::throttle_args::ThrottleArgs;

mod resolve;
mod showdown;

use resolve::{resolve, Resolved};

/// Run sysbench's oltp_read_write (or another OLTP workload) against Keel and
/// watch throughput next to checkpoint age, dirty pages and flushing.
#[derive(Args, Debug, Clone)]
#[command(after_help = after_help())]
#[command(mut_arg("config", |a| a.help(
    "TOML file with engine options (keys it sets override the scenario's and the preset's)",
)))]
pub struct OltpArgs {
    /// The engine to run the workload on: keel, or another embedded engine
    /// for comparison (same transactions, data, seed and threads, same
    /// report); see "Engines" below [default: keel].
    #[arg(long = "engine", value_name = "ENGINE", value_parser = engine_parser())]
    pub engine_name: Option<Engine>,
    /// Scenario preset reproducing one field report (seed), `showdown` to run
    /// the seed presets under both flushing policies and judge steady, or
    /// `list` to list them. It fills only what the command line does not give:
    /// flags, --config, --set (applied after the preset's options), --device
    /// and --vary win.
    #[arg(long, value_name = "NAME", value_parser = preset_parser())]
    pub preset: Option<String>,
    /// Transaction mix: read_write, read_only, write_only, update_index,
    /// update_non_index, point_select, insert [default: read_write].
    #[arg(long, value_name = "W", value_parser = parse_workload)]
    pub workload: Option<Workload>,
    /// Tables sbtest1..N [default: 4].
    #[arg(long, value_name = "N")]
    pub tables: Option<usize>,
    /// Rows per table [default: 100000].
    #[arg(long, value_name = "N")]
    pub table_size: Option<u64>,
    /// Client threads [default: 8].
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Measured seconds, fractions allowed [default: 60].
    #[arg(long, value_name = "S")]
    pub time: Option<f64>,
    /// Seconds per interval line and per JSON/CSV interval [default: 1].
    #[arg(long, value_name = "S")]
    pub report_interval: Option<f64>,
    /// Seconds run before the measurement starts, shown, not measured [default: 0].
    #[arg(long, value_name = "S")]
    pub warmup: Option<f64>,
    /// Read every table and index into the buffer pool before the run, as
    /// sysbench's `prewarm` command does (not measured): the run starts
    /// with its data cached, as far as it fits, instead of reading it in.
    /// `--prewarm` alone means true [default: false; the waves-80 presets: true].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true",
          value_parser = oltp::parse_bool)]
    pub prewarm: Option<bool>,
    /// Id distribution: uniform, special (sysbench's default), pareto, zipf [default: special].
    #[arg(long, value_name = "T", value_parser = parse_rand_type)]
    pub rand_type: Option<RandType>,
    /// Rows per range query [default: 100].
    #[arg(long, value_name = "N")]
    pub range_size: Option<u64>,
    /// Target transactions per second over all threads (0 = as fast as possible);
    /// latency counts from when a transaction was due [default: 0].
    #[arg(long, value_name = "TPS")]
    pub rate: Option<f64>,
    /// Seed of the data and of the clients' choices [default: 1].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Data directory (default: a temporary directory here, removed afterwards).
    /// With --preset showdown, a parent directory: each preset gets DIR/NAME.
    #[arg(long, value_name = "DIR")]
    pub datadir: Option<PathBuf>,
    /// Skip prepare when --datadir already holds the tables.
    #[arg(long)]
    pub reuse_data: bool,
    #[command(flatten)]
    pub throttle: ThrottleArgs,
    /// Serve Keel's metrics at http://ADDR/metrics in Prometheus's text
    /// format while the command runs (each run's database from its start,
    /// its last values until the next run starts), and the running
    /// database's status report at http://ADDR/status (`keel status ADDR`
    /// prints it). ADDR is HOST:PORT, or a port alone for 127.0.0.1:PORT
    /// (loopback: the endpoint has no authentication). Keel only.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    // Only the keys a --config file sets override (see resolve.rs).
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Set one engine option only while the tables are prepared, e.g.
    /// --prepare-set device=unlimited (repeatable; after the preset's).
    #[arg(long = "prepare-set", value_name = "KEY=VALUE")]
    pub prepare_sets: Vec<String>,
    /// Change the device model during the measurement (repeatable): from AT on
    /// (time since the measurement started: 90, 60s, 1m30s, 500ms) the data
    /// files behave like SPEC, anything --device takes: a preset (nvme, sata-ssd,
    /// hdd-raid10, unlimited), a spec, or a preset with overrides. E.g. a backup
    /// taking three quarters of a SATA SSD, then gone: --device sata-ssd
    /// --device-change 60s:sata-ssd,iops=7500,bw=117MiB --device-change
    /// 2m:sata-ssd; a RAID battery failure (write cache lost, every write waits for the disks): --device hdd-raid10 --device-change 90:hdd-raid10,lat=8ms. Needs
    /// a throttled --device (not unlimited, the default). Give the changes in
    /// time order; an AT at or after --time is an error (the change would never
    /// happen), checked before any work, as is every --vary run. Each change
    /// prints `[ 60s ] device -> SPEC` between the interval lines; the JSON
    /// lists them per run (device_changes) and the report's charts mark them
    /// with dashed vertical lines.
    #[arg(long = "device-change", value_name = "AT:SPEC", value_parser = parse_device_change)]
    pub device_changes: Vec<DeviceChange>,
    /// Change an engine option during the measurement, as SET GLOBAL does (repeatable): at AT
    /// (time since the measurement started: 90, 60s, 1m30s, 500ms) KEY becomes VALUE, through
    /// Db::set_option. KEY is one of the options that change at run time: flush_policy
    /// (switch between classic and steady mid-run), io_capacity, io_capacity_max,
    /// max_dirty_pages_pct, max_dirty_pages_pct_lwm, adaptive_flushing, adaptive_flushing_lwm,
    /// flushing_avg_loops, lru_scan_depth, flush_neighbors, flush_sync,
    /// flush_log_at_trx_commit, lock_wait_timeout (the device changes with --device-change;
    /// fill_factor, read only when a bulk load starts, is refused: give it with --set).
    /// E.g. --set flush_policy=classic --set-at 60s:flush_policy=steady, or
    /// --set-at 1m:io_capacity=2000 --set-at 1m:io_capacity_max=4000 (changes due at the same
    /// time are applied in the order given). Every value is checked against every run before
    /// any work, each after the ones before it. Each change prints `[ 60s ] set KEY = VALUE`
    /// between the interval lines; the JSON lists them per run (option_changes) and the
    /// report's charts mark them with dashed vertical lines.
    #[arg(long = "set-at", value_name = "AT:KEY=VALUE", value_parser = parse_option_change)]
    pub option_changes: Vec<OptionChange>,
    /// Hold a read view open during the measurement: at AT (time since the measurement
    /// started: 0, 30s, 1m30s, 500ms) a thread of its own, not one of the clients, begins a
    /// REPEATABLE-READ transaction, reads one row so that its snapshot is taken, and keeps it
    /// open for FOR (a time likewise: 300, 5m), then rolls it back. It simulates a long
    /// report query, or a transaction someone forgot to close. The writers are not stopped:
    /// they go on committing, while purge cannot remove the old row versions the view might
    /// still read, so the history list grows and undo pages take more of the buffer pool;
    /// once the view is released, purge catches up. E.g. a 10-minute run with the view held
    /// for the first 5 minutes: --time 600 --hold-view 0:5m. An AT at or after --time is an
    /// error (the view would never open), checked before any work; AT + FOR past the end
    /// holds the view until the run ends (a note says so). Prints `[ 0s ] view opened` and
    /// `[ 300s ] view released` between the interval lines; the JSON records when (hold_view
    /// per run), and the report's charts mark both with dashed vertical lines next to the
    /// history list length and undo's share of the pool. Keel only.
    #[arg(long = "hold-view", value_name = "AT:FOR", value_parser = parse_hold_view)]
    pub hold_view: Option<HoldView>,
    /// Run once per value, on identical data, e.g. --vary buffer_pool_size=32MiB,64MiB
    /// or --vary threads=1,8 (repeatable: every combination runs).
    #[arg(long, value_name = "KEY=V1,V2,...")]
    pub vary: Vec<String>,
    /// Write every run (options, workload, summary, intervals) as JSON. With
    /// --preset showdown, one file per preset: runs.json -> runs-disaster-55.json.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write every interval of every run as CSV (per preset with --preset
    /// showdown, named like --json's).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Directory for the HTML report (index.html). With --preset showdown:
    /// the summary page and showdown.json, and each preset's report in DIR/NAME/.
    #[arg(long, value_name = "DIR", default_value = "keel-report")]
    pub report: PathBuf,
}

fn after_help() -> String {
    let names: Vec<&str> = oltp::PRESETS.iter().map(|p| p.name).collect();
    let others: Vec<&str> = Engine::ALL
        .iter()
        .filter(|e| **e != Engine::Keel)
        .map(|e| e.name())
        .collect();
    format!(
        "{}\n\nEngines (--engine): in this build: {}. Each other engine is a cargo feature of \
         keel-cli ({}; sqlite, redb and lmdb are on by default, rocksdb is off: its C++ build \
         takes about 16 minutes). They run the same transactions on the same rows (same \
         --seed) with the same threads, in --datadir, and write the same JSON, CSV and report; \
         the fields from Keel's own metrics (checkpoint age, flushing, ...) read 0 and the JSON \
         lists them in not_measured; bytes written per transaction, peak RSS and CPU per \
         transaction (every thread of the process) are measured for every engine. Workload flags (--tables, --table-size, --threads, --time, \
         --workload, --rate, ...) and --vary over them apply to every engine, and so does \
         --reuse-data. Of the engine options, the others read flush_log_at_trx_commit (1: every \
         commit durable when it returns; 0 or 2: no sync at commit, durable within about a \
         second, for sqlite at its next WAL checkpoint); sqlite, redb and rocksdb read \
         buffer_pool_size as their cache size (SQLite's split over its connections; LMDB has no \
         cache of its own and refuses it); sqlite and rocksdb also read lock_wait_timeout (busy \
         timeout, row-lock timeout). Any other option (--set, --config, --vary), --device, --device-change, \
         --set-at, --hold-view, --prepare-set and --preset apply to Keel only and are refused. See docs/engines.md.",
        keel_help(&names),
        Engine::built_names().join(", "),
        others.join(", "),
    )
}

/// `--engine`: every engine, each marked when this build lacks it.
fn engine_parser() -> impl clap::builder::TypedValueParser<Value = Engine> {
    use clap::builder::TypedValueParser as _;
    PossibleValuesParser::new(Engine::ALL.iter().map(|e| {
        let help = match (e, e.built()) {
            (Engine::Keel, _) => "Keel (the default)".to_string(),
            (_, true) => "in this build".to_string(),
            (_, false) => format!("not in this build: cargo feature `{}`", e.name()),
        };
        PossibleValue::new(e.name()).help(help)
    }))
    .map(|s: String| s.parse::<Engine>().unwrap_or_default())
}

/// The help on Keel's own runs: presets and flushing.
fn keel_help(names: &[&str]) -> String {
    format!(
        "With no flags: 4 tables of 100000 rows (about 100 MB, three times the 32 MiB buffer \
         pool) in a temporary directory here, 8 threads, 60 s, a line per second, the report in \
         ./keel-report/. Example: keel bench oltp --vary buffer_pool_size=32MiB,64MiB --time 30 \
         --json runs.json\n\nScenario presets ({}): each reproduces one seed in 2-5 minutes, \
         e.g. keel bench oltp --preset disaster-55; `--preset list` describes them, and any flag \
         given wins over the preset's value. Compare the policies on identical data with \
         --vary flush_policy=classic,steady.\n\nFlushing: flush_policy = steady (the default) \
         measures the device and needs no I/O-capacity knob; it holds the checkpoint age at a \
         setpoint and paces writers above it (at most 100 ms per pause). It accepts and ignores \
         {}. flush_policy = classic is InnoDB 8.0's adaptive flushing with all of those knobs; \
         the seed presets use it. --preset showdown runs {} with --vary \
         flush_policy=classic,steady each ({} s of runs) and writes a pass/fail verdict on \
         every steady run.",
        names.join(", "),
        keel::CLASSIC_ONLY.join(", "),
        oltp::SHOWDOWN_PRESETS
            .iter()
            .map(|p| p.name)
            .collect::<Vec<_>>()
            .join(", "),
        oltp::SHOWDOWN_RUN_SECONDS,
    )
}

/// `--preset`: a preset's name or `list`, each with its one-line description
/// (shown by --help; an unknown name is refused naming the known ones).
fn preset_parser() -> PossibleValuesParser {
    PossibleValuesParser::new(
        oltp::PRESETS
            .iter()
            .map(|p| PossibleValue::new(p.name).help(p.about))
            .chain([
                PossibleValue::new(oltp::SHOWDOWN_NAME).help(oltp::SHOWDOWN_ABOUT),
                PossibleValue::new("list").help("list the presets and exit"),
            ]),
    )
}

fn parse_workload(s: &str) -> std::result::Result<Workload, String> {
    s.parse()
}

fn parse_rand_type(s: &str) -> std::result::Result<RandType, String> {
    s.parse()
}

fn parse_device_change(s: &str) -> std::result::Result<DeviceChange, String> {
    s.parse()
}

fn parse_option_change(s: &str) -> std::result::Result<OptionChange, String> {
    s.parse()
}

fn parse_hold_view(s: &str) -> std::result::Result<HoldView, String> {
    s.parse()
}

/// Run `keel bench oltp`.
pub fn run(a: OltpArgs) -> Result<()> {
    check_engine_flags(&a)?;
    match a.preset.as_deref() {
        Some("list") => {
            print!("{}", oltp::presets_text());
            return Ok(());
        }
        Some(oltp::SHOWDOWN_NAME) => return showdown::run(&a),
        _ => {}
    }
    let tmp;
    let datadir = match &a.datadir {
        Some(d) => d.clone(),
        None => {
            tmp = temp_datadir()?;
            tmp.path().join("db")
        }
    };
    let plan = plan(&a, datadir)?;
    steady_note(&a, &plan)?;
    let throttle = if a.throttle.limit()?.is_none() {
        None
    } else {
        if let Some((label, _, o)) = plan
            .runs()?
            .iter()
            .find(|(_, _, o)| o.device != "unlimited")
        {
            anyhow::bail!(
                "--throttle-write-iops/--throttle-write-bw limit the real disk, but run `{label}` \
                 has the device model `{}`: leave --device unlimited (the default)",
                o.device
            );
        }
        a.throttle.throttle(&plan.datadir)?
    };
    let metrics = match &a.metrics_listen {
        Some(addr) => Some(MetricsEndpoint::start(addr)?),
        None => None,
    };
    let report = execute(&plan, throttle.as_ref(), metrics.as_ref())?;
    write_outputs(&a, &report)
}

/// Refuse, before any work, an engine not built and, for another engine
/// than Keel, every flag and option key it would ignore.
fn check_engine_flags(a: &OltpArgs) -> Result<()> {
    let e = a.engine_name.unwrap_or_default();
    e.check_built()?;
    if e == Engine::Keel {
        return Ok(());
    }
    let flag = |f: &str| anyhow::anyhow!("{f} applies to Keel only, not to --engine {e}");
    if a.preset.is_some() {
        return Err(flag("--preset (a Keel flushing scenario)"));
    }
    if a.engine.device.is_some() {
        return Err(flag("--device (Keel's device model)"));
    }
    if a.metrics_listen.is_some() {
        return Err(flag("--metrics-listen (Keel's metrics)"));
    }
    if !a.device_changes.is_empty() {
        return Err(flag("--device-change"));
    }
    if !a.option_changes.is_empty() {
        return Err(flag("--set-at"));
    }
    if a.hold_view.is_some() {
        return Err(flag("--hold-view (a read view on Keel's Db)"));
    }
    if !a.prepare_sets.is_empty() {
        return Err(flag("--prepare-set"));
    }
    for k in resolve::given_keys(a)? {
        e.check_key(&k)?;
    }
    Ok(())
}

/// A temporary directory here for the data, removed when dropped.
fn temp_datadir() -> Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix("keel-oltp-")
        .tempdir_in(".")
        .context("creating a temporary data directory here (or give --datadir)")
}

/// The plan the command line describes, on `datadir`, with every run
/// checked (before any work).
fn plan(a: &OltpArgs, datadir: PathBuf) -> Result<Plan> {
    let Resolved {
        params,
        options,
        vary,
        prepare_sets,
        preset,
        device_changes,
        option_changes,
        hold_view,
    } = resolve(a)?;
    let plan = Plan {
        engine: a.engine_name.unwrap_or_default(),
        params,
        options,
        vary,
        datadir,
        reuse_data: a.reuse_data,
        prepare_sets,
        preset,
        device_changes,
        option_changes,
        hold_view,
    };
    for (label, p, _) in plan.runs()? {
        if let Some(note) = plan.hold_view.as_ref().and_then(|v| v.note(&p, &label)) {
            eprintln!("note: {note}");
        }
    }
    Ok(plan)
}

/// Say so when a steady run is given classic-only knobs (it ignores them).
fn steady_note(a: &OltpArgs, plan: &Plan) -> Result<()> {
    if plan
        .runs()?
        .iter()
        .any(|(_, _, o)| o.flush_policy == FlushPolicyName::Steady)
    {
        let ignored: Vec<String> = resolve::given_keys(a)?
            .into_iter()
            .filter(|k| keel::CLASSIC_ONLY.contains(&k.as_str()))
            .collect();
        if !ignored.is_empty() {
            eprintln!(
                "note: flush_policy = steady ignores {} (classic's knobs; steady measures the \
                 device instead)",
                ignored.join(", ")
            );
        }
    }
    Ok(())
}

/// Run the plan, printing its preset, progress, interval lines and results.
/// `--metrics-listen`: one endpoint for the whole command, serving the
/// database of the run that started last: its metrics at `/metrics`, and
/// its status report at `/status` while it is open.
pub struct MetricsEndpoint {
    current: Arc<Mutex<Option<Arc<keel::Metrics>>>>,
    status: Arc<Mutex<Option<keel::StatusSource>>>,
    _server: keel::MetricsServer,
}

impl MetricsEndpoint {
    /// Listen on `addr` (`HOST:PORT`, or a port alone for loopback).
    pub fn start(addr: &str) -> Result<MetricsEndpoint> {
        let addr = if addr.parse::<u16>().is_ok() {
            format!("127.0.0.1:{addr}")
        } else {
            addr.to_string()
        };
        let current: Arc<Mutex<Option<Arc<keel::Metrics>>>> = Arc::default();
        let shown = Arc::clone(&current);
        let status: Arc<Mutex<Option<keel::StatusSource>>> = Arc::default();
        let reported = Arc::clone(&status);
        let server = keel::MetricsServer::start_with_status(
            &addr,
            move || {
                let m = shown.lock().unwrap_or_else(|p| p.into_inner()).clone();
                m.map(|m| m.render_prometheus()).unwrap_or_default()
            },
            move || {
                let source = reported.lock().unwrap_or_else(|p| p.into_inner());
                Some(source.as_ref()?.status()?.to_string())
            },
        )
        .context("--metrics-listen")?;
        let local = server.local_addr();
        println!("metrics: http://{local}/metrics");
        println!("status report: http://{local}/status (keel status {local})");
        Ok(MetricsEndpoint {
            current,
            status,
            _server: server,
        })
    }

    fn on_event(&self, e: &Event<'_>) {
        if let Event::RunStart { keel: Some(db), .. } = e {
            *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(db.metrics_shared());
            *self.status.lock().unwrap_or_else(|p| p.into_inner()) = Some(db.status_source());
        }
    }
}

/// With `throttle`, each run's measurement (not its prepare) runs in the
/// throttle's cgroup; with `metrics`, each run's metrics are served.
fn execute(
    plan: &Plan,
    throttle: Option<&Throttle>,
    metrics: Option<&MetricsEndpoint>,
) -> Result<OltpReport> {
    if let Some((p, given)) = &plan.preset {
        println!(
            "preset {}: seed {} {}: {}{}",
            p.name,
            p.seed,
            oltp::seed(p.seed).map_or_else(|| format!("\"{}\"", p.seed_title), |s| s.citation()),
            p.about,
            if given.is_empty() {
                String::new()
            } else {
                format!(" (given on the command line: {})", given.join(", "))
            }
        );
    }
    let mut progress = Progress::new();
    Ok(oltp::run_plan(plan, &mut |e| {
        if let Some(t) = throttle {
            throttle_run(t, &e);
        }
        if let Some(m) = metrics {
            m.on_event(&e);
        }
        on_event(e, &mut progress)
    })?)
}

/// Put this process in `t`'s cgroup when a run starts, out of it when the
/// run ends. A failure to join stops the command: the run would not meet
/// the disk it was asked for.
fn throttle_run(t: &Throttle, e: &Event<'_>) {
    let pid = std::process::id();
    match e {
        Event::RunStart { .. } => {
            if let Err(err) = t.add(pid) {
                eprintln!("keel: error: {err}");
                std::process::exit(1);
            }
            println!(
                "writes to disk {} limited to {} (cgroup {})",
                t.device(),
                t.limit(),
                t.dir().display()
            );
        }
        Event::RunDone { .. } => {
            if let Err(err) = t.remove(pid) {
                eprintln!("keel: warning: {err}");
            }
        }
        _ => {}
    }
}

fn write_outputs(a: &OltpArgs, report: &OltpReport) -> Result<()> {
    if let Some(p) = &a.json {
        oltp::write_json(report, p)?;
        println!("JSON: {}", p.display());
    }
    if let Some(p) = &a.csv {
        oltp::write_csv(report, p)?;
        println!("CSV: {}", p.display());
    }
    let page = oltp::write_html_report(report, &a.report)?;
    println!("report: {}", page.display());
    Ok(())
}

/// The prepare progress bar: redrawn in place on a terminal, a line every
/// few seconds otherwise.
struct Progress {
    tty: bool,
    last: Option<Instant>,
}

impl Progress {
    fn new() -> Self {
        Progress {
            tty: std::io::stderr().is_terminal(),
            last: None,
        }
    }

    fn show(&mut self, dir: &Path, done: u64, total: u64, secs: f64) {
        let frac = done as f64 / total.max(1) as f64;
        let rate = done as f64 / secs.max(1e-9);
        let finished = done >= total;
        if self.tty {
            let filled = (frac * 30.0).round() as usize;
            eprint!(
                "\rprepare {}: [{}{}] {:>3.0}% {done}/{total} rows, {rate:.0} rows/s",
                dir.display(),
                "#".repeat(filled),
                " ".repeat(30 - filled.min(30)),
                frac * 100.0
            );
            if finished {
                eprintln!();
            }
            let _ = std::io::stderr().flush();
        } else if finished || self.last.is_none_or(|t| t.elapsed().as_secs_f64() >= 5.0) {
            eprintln!(
                "prepare {}: {:.0}% {done}/{total} rows, {rate:.0} rows/s",
                dir.display(),
                frac * 100.0
            );
            self.last = Some(Instant::now());
        }
    }
}

fn on_event(e: Event<'_>, progress: &mut Progress) {
    match e {
        Event::Prepare {
            dir,
            rows_done,
            rows_total,
            elapsed_s,
        } => progress.show(dir, rows_done, rows_total, elapsed_s),
        Event::Reused { dir } => println!("reusing the tables in {}", dir.display()),
        Event::RunStart {
            index,
            count,
            label,
            params,
            options,
            engine,
            settings,
            ..
        } => match engine {
            Engine::Keel => print_header(index, count, label, params, options),
            _ => print_other_header(index, count, label, params, engine, settings),
        },
        Event::Interval {
            threads,
            interval,
            warmup,
        } => println!("{}", oltp::interval_line(threads, interval, warmup)),
        Event::Prewarmed {
            entries,
            elapsed_s,
            free_pages,
            total_pages,
        } => println!(
            "prewarm: read {entries} rows and index entries in {elapsed_s:.1} s{}",
            if total_pages > 0 {
                format!("; buffer pool {free_pages} of {total_pages} pages free")
            } else {
                String::new()
            }
        ),
        Event::DeviceChanged { change } => println!("{}", oltp::device_change_line(change)),
        Event::OptionChanged { change } => println!("{}", oltp::option_change_line(change)),
        Event::ViewOpened { view } | Event::ViewReleased { view } => {
            println!("{}", oltp::view_line(view))
        }
        Event::RunDone { result } => print_result(result),
        _ => {}
    }
}

/// `run i/n (label): ` when the plan has several runs.
fn run_prefix(index: usize, count: usize, label: &str) -> String {
    if count > 1 {
        format!("run {index}/{count} ({label}): ")
    } else {
        String::new()
    }
}

/// The workload part of a run's header line.
fn workload_text(p: &OltpParams) -> String {
    format!(
        "{} tables × {} rows, {} threads, {} s{}, rand {}, range {}{}",
        p.tables,
        p.table_size,
        p.threads,
        p.time_s,
        if p.warmup_s > 0.0 {
            format!(" after {} s warm-up", p.warmup_s)
        } else {
            String::new()
        },
        p.rand_type,
        p.range_size,
        if p.rate > 0.0 {
            format!(", rate {} tps", p.rate)
        } else {
            String::new()
        },
    )
}

/// The header line of a run on another engine: its mapped settings.
fn print_other_header(
    index: usize,
    count: usize,
    label: &str,
    p: &OltpParams,
    engine: Engine,
    settings: &serde_json::Map<String, serde_json::Value>,
) {
    let settings: Vec<String> = settings
        .iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k} {s}"),
            v => format!("{k} {v}"),
        })
        .collect();
    println!(
        "\n{}keel bench oltp {} on {engine}: {}; {}",
        run_prefix(index, count, label),
        p.workload,
        workload_text(p),
        settings.join(", ")
    );
}

fn print_header(index: usize, count: usize, label: &str, p: &OltpParams, o: &Options) {
    println!(
        "\n{}keel bench oltp {}: {}; \
         isolation {}, buffer pool {} MiB, page {} B, redo {} × {} MiB, device {}, \
         flush_method {}, flush policy {}",
        run_prefix(index, count, label),
        p.workload,
        workload_text(p),
        o.transaction_isolation,
        o.buffer_pool_size >> 20,
        o.page_size,
        o.log_files_in_group,
        o.log_file_size >> 20,
        o.device,
        o.flush_method,
        policy_summary(o),
    );
}

/// The policy and the knobs it reads, for the run's header line.
fn policy_summary(o: &Options) -> String {
    match o.flush_policy {
        FlushPolicyName::Classic => format!(
            "classic (io_capacity {}, io_capacity_max {}, flush_neighbors {})",
            o.io_capacity,
            o.effective_io_capacity_max(),
            o.flush_neighbors
        ),
        FlushPolicyName::Steady => format!(
            "steady (no I/O-capacity knob: the classic knobs are ignored; flush_neighbors {})",
            o.flush_neighbors
        ),
    }
}

fn print_result(r: &RunResult) {
    let s = &r.summary;
    let l = &s.latency_ms;
    if !r.status.is_empty() {
        print!("\n{}", r.status);
    }
    let keel = s.not_measured.is_empty();
    println!(
        "\n{}: {} transactions ({:.1}/s), {} queries ({:.1}/s), {} errors (retried) in {:.1} s\n\
         latency (ms): avg {:.2} p50 {:.2} p95 {:.2} p99 {:.2} p99.9 {:.2} max {:.2}\n\
         tps per interval: median {:.1} min {:.1} p01 {:.1} cv {:.3}; {} stall intervals, longest stall {:.1} s",
        r.label,
        s.transactions,
        s.tps_avg,
        s.queries,
        s.queries as f64 / s.time_s.max(1e-9),
        s.errors,
        s.time_s,
        l.avg,
        l.p50,
        l.p95,
        l.p99,
        l.p999,
        l.max,
        s.tps_median,
        s.tps_min,
        s.tps_p01,
        s.cv,
        s.stall_intervals,
        s.longest_stall_s,
    );
    if keel {
        println!(
            "per transaction: {:.2} pages written, {:.0} redo bytes; sync flush waits {} ({:.1} ms); \
             throttle {:.1} ms",
            s.pages_written_per_txn,
            s.log_bytes_per_txn,
            s.sync_flush_waits,
            s.sync_flush_wait_ms_total,
            s.throttle_delay_ms_total,
        );
        println!(
            "history ({}): list length up to {}, {} undo records purged, {} undo pages written",
            if r.isolation.is_empty() {
                "isolation not recorded"
            } else {
                r.isolation.as_str()
            },
            s.history_len_max,
            s.undo_records_purged_total,
            s.undo_pages_written_total,
        );
    }
    println!("{}", bytes_line(s));
    println!(
        "process ({}): peak RSS {:.1} MiB{}{}",
        r.engine,
        s.peak_rss_bytes as f64 / f64::from(1u32 << 20),
        s.cpu_us_per_txn
            .map(|c| format!(", CPU {c:.0} us per transaction (every thread)"))
            .unwrap_or_default(),
        if keel {
            String::new()
        } else {
            "; Keel's flushing metrics not measured".to_string()
        }
    );
}

/// The bytes written per transaction: the engine's own counters by kind of
/// file where it has them, and the disk's counter (every process's writes
/// to the block device holding the data directory), or why it was not
/// measured.
fn bytes_line(s: &keel_bench::oltp::Summary) -> String {
    let disk = match s.device_bytes_per_txn {
        Some(d) => format!("disk {d:.0} ({})", s.device),
        None if s.device.is_empty() => "disk not measured".to_string(),
        None => format!("disk {}", s.device),
    };
    if s.not_measured.iter().any(|f| f == "engine_bytes_per_txn") {
        return format!("bytes written per transaction: {disk}");
    }
    format!(
        "bytes written per transaction: redo {:.0} + doublewrite {:.0} + data {:.0} + other {:.0} \
         = {:.0} by the engine's count; {disk}",
        s.log_bytes_per_txn,
        s.dblwr_bytes_per_txn,
        s.data_bytes_per_txn,
        s.other_bytes_per_txn,
        s.engine_bytes_per_txn,
    )
}
