//! `keel bench oltp`: sysbench's OLTP workloads over the engine, with a
//! line per report interval, the engine status at the end, and JSON, CSV
//! and an HTML report. The work is in `keel_bench::oltp`; this file parses
//! the flags and prints.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use keel::Options;
use keel_bench::oltp::{
    self, Event, OltpParams, OltpReport, Plan, RandType, RunResult, VaryAxis, Workload,
};

/// Run sysbench's oltp_read_write (or another OLTP workload) against Keel and
/// watch throughput next to checkpoint age, dirty pages and flushing.
#[derive(Args, Debug, Clone)]
#[command(
    after_help = "With no flags: 4 tables of 100000 rows (about 100 MB, three times the \
                  32 MiB buffer pool) in a temporary directory here, 8 threads, 60 s, a line \
                  per second, the report in ./keel-report/. Example: keel bench oltp \
                  --vary buffer_pool_size=32MiB,64MiB --time 30 --json runs.json"
)]
pub struct OltpArgs {
    /// Transaction mix: read_write, read_only, write_only, update_index,
    /// update_non_index, point_select, insert.
    #[arg(long, value_name = "W", default_value = "read_write", value_parser = parse_workload)]
    pub workload: Workload,
    /// Tables sbtest1..N.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub tables: usize,
    /// Rows per table.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub table_size: u64,
    /// Client threads.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub threads: usize,
    /// Measured seconds (fractions allowed).
    #[arg(long, value_name = "S", default_value_t = 60.0)]
    pub time: f64,
    /// Seconds per interval line (and per JSON/CSV interval).
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    pub report_interval: f64,
    /// Seconds run before the measurement starts (shown, not measured).
    #[arg(long, value_name = "S", default_value_t = 0.0)]
    pub warmup: f64,
    /// Id distribution: uniform, special (sysbench's default), pareto, zipf.
    #[arg(long, value_name = "T", default_value = "special", value_parser = parse_rand_type)]
    pub rand_type: RandType,
    /// Rows per range query.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub range_size: u64,
    /// Target transactions per second over all threads (0 = as fast as possible);
    /// latency counts from when a transaction was due.
    #[arg(long, value_name = "TPS", default_value_t = 0.0)]
    pub rate: f64,
    /// Seed of the data and of the clients' choices.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Data directory (default: a temporary directory here, removed afterwards).
    #[arg(long, value_name = "DIR")]
    pub datadir: Option<PathBuf>,
    /// Skip prepare when --datadir already holds the tables.
    #[arg(long)]
    pub reuse_data: bool,
    /// TOML file with engine options (keys it sets override the scenario's defaults).
    #[arg(long, value_name = "FILE.toml")]
    pub config: Option<PathBuf>,
    /// Set one engine option, e.g. --set buffer_pool_size=64MiB (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Device model: unlimited, hdd-raid10, sata-ssd, nvme, or a spec like iops=1500,bw=120MiB,lat=100us,seek=4ms,qd=8.
    #[arg(long, value_name = "SPEC")]
    pub device: Option<String>,
    /// Run once per value, on identical data, e.g. --vary buffer_pool_size=32MiB,64MiB
    /// or --vary threads=1,8 (repeatable: every combination runs).
    #[arg(long, value_name = "KEY=V1,V2,...")]
    pub vary: Vec<String>,
    /// Write every run (options, workload, summary, intervals) as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write every interval of every run as CSV.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Directory for the HTML report (index.html).
    #[arg(long, value_name = "DIR", default_value = "keel-report")]
    pub report: PathBuf,
}

fn parse_workload(s: &str) -> std::result::Result<Workload, String> {
    s.parse()
}

fn parse_rand_type(s: &str) -> std::result::Result<RandType, String> {
    s.parse()
}

/// The default scenario's engine options: a pool smaller than the data.
const SCENARIO: &[(&str, &str)] = &[("buffer_pool_size", "32MiB")];

/// Scenario defaults, then the keys the TOML file sets, then --set, then --device.
fn engine_options(a: &OltpArgs) -> Result<Options> {
    let mut o = Options::default();
    for (k, v) in SCENARIO {
        o.set(k, v)?;
    }
    if let Some(path) = &a.config {
        let file = Options::from_toml_file(path)?;
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let given: Vec<&str> = text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, _)| k.trim())
            .filter(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
            .collect();
        for (k, v) in file.entries() {
            if given.contains(&k.as_str()) {
                o.set(&k, &v)?;
            }
        }
    }
    o.apply_sets(a.sets.iter().map(String::as_str))?;
    if let Some(d) = &a.device {
        o.set("device", d)?;
    }
    o.validate()?;
    Ok(o)
}

fn params(a: &OltpArgs) -> OltpParams {
    OltpParams {
        workload: a.workload,
        tables: a.tables,
        table_size: a.table_size,
        threads: a.threads,
        time_s: a.time,
        report_interval_s: a.report_interval,
        warmup_s: a.warmup,
        rand_type: a.rand_type,
        range_size: a.range_size,
        rate: a.rate,
        seed: a.seed,
    }
}

/// Run `keel bench oltp`.
pub fn run(a: OltpArgs) -> Result<()> {
    let options = engine_options(&a)?;
    let vary = a
        .vary
        .iter()
        .map(|v| v.parse::<VaryAxis>())
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let tmp;
    let datadir = match &a.datadir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::Builder::new()
                .prefix("keel-oltp-")
                .tempdir_in(".")?;
            tmp.path().join("db")
        }
    };
    let plan = Plan {
        params: params(&a),
        options,
        vary,
        datadir,
        reuse_data: a.reuse_data,
    };
    plan.runs()?;
    let mut progress = Progress::new();
    let report = oltp::run_plan(&plan, &mut |e| on_event(e, &mut progress))?;
    write_outputs(&a, &report)
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
        } => print_header(index, count, label, params, options),
        Event::Interval {
            threads,
            interval,
            warmup,
        } => println!("{}", oltp::interval_line(threads, interval, warmup)),
        Event::RunDone { result } => print_result(result),
        _ => {}
    }
}

fn print_header(index: usize, count: usize, label: &str, p: &OltpParams, o: &Options) {
    let run = if count > 1 {
        format!("run {index}/{count} ({label}): ")
    } else {
        String::new()
    };
    println!(
        "\n{run}keel bench oltp {}: {} tables × {} rows, {} threads, {} s{}, rand {}, range {}{}; \
         buffer pool {} MiB, page {} B, redo {} × {} MiB, device {}, flush_method {}, flush policy interim",
        p.workload,
        p.tables,
        p.table_size,
        p.threads,
        p.time_s,
        if p.warmup_s > 0.0 { format!(" after {} s warm-up", p.warmup_s) } else { String::new() },
        p.rand_type,
        p.range_size,
        if p.rate > 0.0 { format!(", rate {} tps", p.rate) } else { String::new() },
        o.buffer_pool_size >> 20,
        o.page_size,
        o.log_files_in_group,
        o.log_file_size >> 20,
        o.device,
        o.flush_method,
    );
}

fn print_result(r: &RunResult) {
    let s = &r.summary;
    let l = &s.latency_ms;
    print!("\n{}", r.status);
    println!(
        "\n{}: {} transactions ({:.1}/s), {} queries ({:.1}/s), {} errors (retried) in {:.1} s\n\
         latency (ms): avg {:.2} p50 {:.2} p95 {:.2} p99 {:.2} p99.9 {:.2} max {:.2}\n\
         tps per interval: median {:.1} min {:.1} p01 {:.1} cv {:.3}; {} stall intervals, longest stall {:.1} s\n\
         per transaction: {:.2} pages written, {:.0} redo bytes; sync flush waits {} ({:.1} ms); throttle {:.1} ms",
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
        s.pages_written_per_txn,
        s.log_bytes_per_txn,
        s.sync_flush_waits,
        s.sync_flush_wait_ms_total,
        s.throttle_delay_ms_total,
    );
}
