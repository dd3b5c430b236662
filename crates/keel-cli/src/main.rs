//! `keel`: benchmarks, device characterization and inspection for the Keel
//! storage engine.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use keel::Db;
use keel_bench::basic::{self, BasicConfig};

use engine_args::EngineArgs;

mod backup;
mod check;
mod crashtest;
mod engine_args;
mod innodb;
mod inspect;
mod iobench;
mod oltp;
mod report;
mod status;
mod throttle_args;

#[derive(Parser)]
#[command(
    name = "keel",
    version,
    about = "Keel storage engine: benchmarks and tools"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a benchmark workload.
    #[command(subcommand)]
    Bench(Bench),
    /// Characterize a device: random/sequential reads and writes over a sweep of
    /// block sizes, worker counts, file counts and I/O methods (IObench/fio-style).
    Iobench(iobench::IobenchArgs),
    /// Crash loop: a child process runs bank transfers and is killed with
    /// SIGKILL at random moments; after each recovery the total balance and
    /// every acknowledged transfer are checked.
    Crashtest(crashtest::CrashtestArgs),
    /// The crash loop's child process (internal).
    #[command(hide = true)]
    CrashtestChild(crashtest::ChildArgs),
    /// Print what a database directory holds without opening it (closed, crashed, or open
    /// in another process): file headers, checkpoints, the log's end (redo recovery would
    /// replay), page counts. Reads only; takes no lock.
    Inspect(inspect::InspectArgs),
    /// Recover a database if a crash left it so, then verify every page
    /// checksum, every B+tree, and that the bench tables' `k` indexes agree
    /// with their rows; exits 1 on any problem (--json: one JSON object).
    /// Refuses a database another process has open (recovery writes), with
    /// exit status 2: --read-only then checks the files as they stand,
    /// replaying no log.
    Check(check::CheckArgs),
    /// Copy a closed database into a new directory, consistently: the
    /// database is opened read-only (nothing in it is written) and copied
    /// as `Db::backup` copies a running one. For a database a process has
    /// open, call `Db::backup` in that process.
    Backup(backup::BackupArgs),
    /// Merge the JSON files of several benchmark invocations (Keel's runs and other
    /// engines') into one HTML report, one JSON file and one summary table.
    Report(report::ReportArgs),
    /// Print the engine status report (InnoDB's SHOW ENGINE INNODB STATUS) of a running
    /// process from its metrics endpoint: http://ADDR/status, served beside /metrics by
    /// `keel bench oltp --metrics-listen ADDR` and by a program's `Db::serve_metrics`.
    Status(status::StatusArgs),
}

#[derive(Subcommand)]
enum Bench {
    /// Load rows in random order, read random keys back, run short scans, verify every value.
    Basic(BasicArgs),
    /// Commits per second for each flush_log_at_trx_commit and thread count (shows group commit).
    Commit(CommitArgs),
    /// Write until N bytes of redo lie beyond the checkpoint, crash, and time the recovery.
    Recovery(RecoveryArgs),
    /// sysbench's OLTP workloads (oltp_read_write by default) with per-interval lines, JSON, CSV and an HTML report.
    Oltp(Box<oltp::OltpArgs>),
    /// The same OLTP workload on real InnoDB (a private MariaDB server driven by sysbench),
    /// with Keel's options mapped to InnoDB's, written in Keel's JSON format.
    Innodb(Box<innodb::InnodbArgs>),
}

#[derive(Args)]
struct CommitArgs {
    /// flush_log_at_trx_commit values to measure, comma-separated (1 = sync per commit, 2 = write per commit, 0 = once a second).
    #[arg(long, value_delimiter = ',', default_value = "1,2,0")]
    trx_commit: Vec<u8>,
    /// Client thread counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,8")]
    threads: Vec<usize>,
    /// Seconds per configuration.
    #[arg(long, default_value_t = 5.0)]
    time: f64,
    /// Directory for the temporary databases (default: a temporary directory here).
    #[arg(long)]
    dir: Option<PathBuf>,
    #[command(flatten)]
    engine: EngineArgs,
}

#[derive(Args)]
struct RecoveryArgs {
    /// Redo to leave beyond the checkpoint before the crash (e.g. 256MiB).
    #[arg(long, default_value = "64MiB")]
    redo: String,
    /// Directory for the temporary database (default: a temporary directory here).
    #[arg(long)]
    dir: Option<PathBuf>,
    #[command(flatten)]
    engine: EngineArgs,
}

#[derive(Args)]
struct BasicArgs {
    /// Rows to load.
    #[arg(long, default_value_t = 200_000)]
    rows: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 200)]
    value_size: usize,
    /// Random point gets after the load.
    #[arg(long, default_value_t = 200_000)]
    gets: u64,
    /// Scans after the gets.
    #[arg(long, default_value_t = 20_000)]
    scans: u64,
    /// Rows per scan.
    #[arg(long, default_value_t = 100)]
    scan_len: usize,
    /// Worker threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Random seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Database directory (default: a temporary directory, removed afterwards).
    #[arg(long)]
    datadir: Option<PathBuf>,
    /// Buffer pool size (shorthand for --set buffer_pool_size=...).
    #[arg(long, default_value = "64MiB")]
    buffer_pool_size: String,
    #[command(flatten)]
    engine: EngineArgs,
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    if let Err(e) = run(Cli::parse()) {
        eprintln!("keel: error: {e:#}");
        // A run stopped by Ctrl-C exits as the shell expects of SIGINT.
        let interrupted = matches!(
            e.downcast_ref::<keel_bench::oltp::OltpError>(),
            Some(keel_bench::oltp::OltpError::Interrupted)
        );
        let in_use = e.downcast_ref::<check::InUse>().is_some();
        std::process::exit(if interrupted {
            130
        } else if in_use {
            check::IN_USE_EXIT
        } else {
            1
        });
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.cmd {
        Command::Bench(Bench::Basic(a)) => bench_basic(a),
        Command::Bench(Bench::Commit(a)) => bench_commit(a),
        Command::Bench(Bench::Recovery(a)) => bench_recovery(a),
        Command::Bench(Bench::Oltp(a)) => oltp::run(*a),
        Command::Bench(Bench::Innodb(a)) => innodb::run(*a),
        Command::Iobench(a) => iobench::run(a),
        Command::Crashtest(a) => crashtest::run(a),
        Command::CrashtestChild(a) => crashtest::child(a),
        Command::Inspect(a) => inspect::run(a),
        Command::Check(a) => check::run(a),
        Command::Backup(a) => backup::run(a),
        Command::Report(a) => report::run(a),
        Command::Status(a) => status::run(a),
    }
}

fn bench_basic(a: BasicArgs) -> Result<()> {
    // --set and --device win over the shorthand flag.
    let opts = a.engine.options_with(|o| {
        o.set("buffer_pool_size", &a.buffer_pool_size)
            .context("--buffer-pool-size")
    })?;
    let tmp;
    let dir = match &a.datadir {
        Some(d) => d.clone(),
        None => {
            tmp = scratch_dir(&None)?;
            tmp.path().to_path_buf()
        }
    };
    let db = Db::open(&dir, opts.clone()).with_context(|| format!("opening {}", dir.display()))?;
    let t = db.table_or_create("basic")?;
    let cfg = BasicConfig {
        rows: a.rows,
        value_size: a.value_size,
        gets: a.gets,
        scans: a.scans,
        scan_len: a.scan_len,
        threads: a.threads,
        seed: a.seed,
    };
    println!(
        "keel bench basic: {} rows of {} bytes, {} gets, {} scans of {}, {} thread(s); buffer pool {} MiB, page {} B, {} data files, device {}, flush_method {}",
        cfg.rows, cfg.value_size, cfg.gets, cfg.scans, cfg.scan_len, cfg.threads,
        opts.buffer_pool_size >> 20, opts.page_size, opts.data_files, opts.device, opts.flush_method
    );
    let phases = basic::run(&db, &t, &cfg)?;
    for p in &phases {
        println!(
            "{:>10}: {:>9} ops {:>9} rows in {:>7.2} s = {:>10.0} rows/s | pages read {:>8} written {:>8}",
            p.name, p.ops, p.rows, p.secs, p.rows_per_s, p.pages_read, p.pages_written
        );
    }
    let stats = t.check()?;
    println!(
        "tree: height {}, {} leaf + {} internal pages, {} entries — invariants hold",
        stats.height, stats.leaf_pages, stats.internal_pages, stats.entries
    );
    let m = db.metrics();
    for name in [
        "buffer_pool_reads",
        "buffer_pages_written",
        "buffer_LRU_batch_flush_total_pages",
        "buffer_flush_background_total_pages",
        "buffer_LRU_single_flush_total_pages",
        "os_data_writes",
        "os_data_fsyncs",
        "log_bytes_written",
        "log_checkpoints",
        "buffer_flush_sync_waits",
        "buffer_flush_sync_total_pages",
        "buffer_flush_sync_wait_us_total",
        "buffer_flush_sync_wait_us_max",
    ] {
        println!("  {name} = {}", m.get(name).unwrap_or(0));
    }
    db.close()?;
    if let Some(b) = keel_bench::sys::peak_rss_bytes() {
        println!(
            "peak memory (VmHWM): {:.1} MiB",
            b as f64 / (1 << 20) as f64
        );
    }
    Ok(())
}

/// A temporary directory `keel-bench-*` in `dir` (default: here).
fn scratch_dir(dir: &Option<PathBuf>) -> Result<tempfile::TempDir> {
    let base = dir.clone().unwrap_or_else(|| PathBuf::from("."));
    tempfile::Builder::new()
        .prefix("keel-bench-")
        .tempdir_in(&base)
        .with_context(|| format!("creating a temporary directory in {}", base.display()))
}

fn bench_commit(a: CommitArgs) -> Result<()> {
    let opts = a.engine.options()?;
    println!(
        "{:>10} {:>8} {:>10} {:>12} {:>16}",
        "trx_commit", "threads", "commits", "commits/s", "log syncs/commit"
    );
    for &tc in &a.trx_commit {
        for &th in &a.threads {
            let tmp = scratch_dir(&a.dir)?;
            let r = keel_bench::durability::commit_rate(
                tmp.path(),
                opts.clone(),
                tc,
                th,
                std::time::Duration::from_secs_f64(a.time),
            )?;
            println!(
                "{:>10} {:>8} {:>10} {:>12.0} {:>16.3}",
                r.trx_commit, r.threads, r.commits, r.per_s, r.fsyncs_per_commit
            );
        }
    }
    Ok(())
}

fn bench_recovery(a: RecoveryArgs) -> Result<()> {
    let opts = a.engine.options()?;
    let redo = keel::Options::parse_size(&a.redo)
        .map_err(anyhow::Error::msg)
        .context("--redo")?;
    let tmp = scratch_dir(&a.dir)?;
    let r = keel_bench::durability::recovery_time(tmp.path(), opts, redo)?;
    println!(
        "redo beyond checkpoint {:.1} MiB ({} rows): recovery {} ms (open {} ms), {} page records applied to {} pages",
        r.redo_bytes as f64 / (1 << 20) as f64,
        r.rows,
        r.recovery_ms,
        r.open_ms,
        r.page_records,
        r.pages
    );
    Ok(())
}
