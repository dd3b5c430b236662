//! `keel bench innodb`: the OLTP workload on real InnoDB (a private
//! MariaDB server driven by sysbench), written in `keel bench oltp`'s JSON
//! format for `keel report`. The work is in `keel_bench::innodb`; this file
//! parses the flags and prints.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use keel_bench::innodb::{self, InnodbEvent, InnodbPlan};
use keel_bench::oltp::{self, OltpParams, RandType, Workload};

use crate::throttle_args::ThrottleArgs;

/// Run sysbench's OLTP workload against InnoDB (a private MariaDB server) with
/// Keel's options mapped one to one, and write the run in Keel's JSON format.
#[derive(Args, Debug, Clone)]
#[command(
    after_help = "Needs the Debian packages mariadb-server, mariadb-client and sysbench \
(an error names the missing ones; nothing is installed). The server is private: its own data \
directory, a Unix socket, no TCP port, no option file; it is stopped and its files removed \
at the end, also on an error or Ctrl-C (SIGINT, SIGTERM, SIGHUP: exit status 130).\n\nKeel's options map to InnoDB's variables: buffer_pool_size \
-> innodb_buffer_pool_size, log_file_size x log_files_in_group -> innodb_log_file_size, \
flush_log_at_trx_commit, flush_method, io_capacity(_max), doublewrite, flush_neighbors, \
lru_scan_depth, max_dirty_pages_pct(_lwm), adaptive_flushing(_lwm), flushing_avg_loops, \
flush_sync, old_blocks_pct/time, write_io_threads, lock_wait_timeout, fill_factor, page_size -> \
the same name with innodb_. Options with no InnoDB equivalent (flush_policy, device, data_files, \
page_cleaners, buffer_pool_instances, doublewrite_files/pages) are refused. Keel's defaults \
apply to what is not given, so both engines run with the same values.\n\nExample, both \
engines on the disk throttled to 300 write IOPS (as root):\n  keel bench innodb --tables 8 \
--table-size 200000 --set buffer_pool_size=1GiB --set log_file_size=32MiB \
--set flush_log_at_trx_commit=2 --time 120 --throttle-write-iops 300 --json innodb-300.json\n  \
keel bench oltp (the same flags) --set flush_policy=classic --json classic-300.json\n  \
keel report innodb-300.json classic-300.json --out compare-300"
)]
pub struct InnodbArgs {
    /// Transaction mix: read_write, read_only, write_only, update_index,
    /// update_non_index, point_select, insert.
    #[arg(long, value_name = "W", default_value = "read_write", value_parser = parse_workload)]
    workload: Workload,
    /// Tables sbtest1..N.
    #[arg(long, value_name = "N", default_value_t = 4)]
    tables: usize,
    /// Rows per table.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    table_size: u64,
    /// Client threads.
    #[arg(long, value_name = "N", default_value_t = 8)]
    threads: usize,
    /// Measured seconds (whole seconds: sysbench's --time).
    #[arg(long, value_name = "S", default_value_t = 60.0)]
    time: f64,
    /// Seconds per interval line and JSON interval (whole seconds).
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    report_interval: f64,
    /// Id distribution: uniform, special, pareto, zipf.
    #[arg(long, value_name = "T", default_value = "special", value_parser = parse_rand_type)]
    rand_type: RandType,
    /// Rows per range query.
    #[arg(long, value_name = "N", default_value_t = 100)]
    range_size: u64,
    /// Target transactions per second over all threads (0 = as fast as possible).
    #[arg(long, value_name = "TPS", default_value_t = 0.0)]
    rate: f64,
    /// Seed of sysbench's random choices.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Set one Keel option, mapped to its InnoDB variable, e.g. --set
    /// buffer_pool_size=1GiB (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Directory for the server's files, new or empty (default: a temporary
    /// directory here). It must be on the disk to measure.
    #[arg(long, value_name = "DIR")]
    datadir: Option<PathBuf>,
    /// Keep the server's files (data directory, error log) afterwards.
    #[arg(long)]
    keep_data: bool,
    #[command(flatten)]
    throttle: ThrottleArgs,
    /// The run's label in the JSON and reports [default: innodb].
    #[arg(long, value_name = "TEXT")]
    label: Option<String>,
    /// Write the run (options, workload, summary, intervals) as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write every interval as CSV.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Directory for the HTML report (index.html).
    #[arg(long, value_name = "DIR", default_value = "keel-report")]
    report: PathBuf,
}

fn parse_workload(s: &str) -> std::result::Result<Workload, String> {
    s.parse()
}

fn parse_rand_type(s: &str) -> std::result::Result<RandType, String> {
    s.parse()
}

pub fn run(a: InnodbArgs) -> Result<()> {
    let params = OltpParams {
        workload: a.workload,
        tables: a.tables,
        table_size: a.table_size,
        threads: a.threads,
        time_s: a.time,
        report_interval_s: a.report_interval,
        rand_type: a.rand_type,
        range_size: a.range_size,
        rate: a.rate,
        seed: a.seed,
        ..OltpParams::default()
    };
    let tmp;
    let datadir = match &a.datadir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::Builder::new()
                .prefix("keel-innodb-")
                .tempdir_in(".")
                .context("creating a temporary data directory here (or give --datadir)")?;
            tmp.path().join("mariadb")
        }
    };
    let plan = InnodbPlan {
        params,
        sets: a.sets.clone(),
        datadir,
        throttle: a.throttle.limit()?,
        label: a.label.clone(),
        keep: a.keep_data,
    };
    let threads = plan.params.threads;
    let report = innodb::run(&plan, &mut |e| match e {
        InnodbEvent::Step(s) => println!("innodb: {s}"),
        InnodbEvent::Interval(iv) => println!("{}", oltp::interval_line(threads, iv, false)),
        _ => {}
    })?;
    for r in &report.runs {
        println!("{}", r.status.trim_end());
    }
    print!("{}", oltp::summary_text(&report));
    if a.keep_data {
        println!("the server's files are kept in {}", plan.datadir.display());
    }
    if let Some(p) = &a.json {
        oltp::write_json(&report, p)?;
        println!("JSON: {}", p.display());
    }
    if let Some(p) = &a.csv {
        oltp::write_csv(&report, p)?;
        println!("CSV: {}", p.display());
    }
    let page = oltp::write_html_report(&report, &a.report)?;
    println!("report: {}", page.display());
    Ok(())
}
