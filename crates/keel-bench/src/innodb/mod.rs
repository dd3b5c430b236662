//! `keel bench innodb`: the same OLTP workload on real InnoDB (MariaDB
//! through sysbench), measured like `keel bench oltp` and written in its
//! JSON format, so that `keel report` shows both engines in one page.
//!
//! The run: find the programs (an error names the Debian packages that
//! are missing; nothing is installed), start a private server
//! ([`server::Server`]: a Unix socket, no TCP port) with Keel's options
//! mapped one to one ([`settings`]), `sysbench prepare` the tables, write
//! every dirty page (as `keel bench oltp` flushes after prepare), put the
//! server under the write limit if one is given ([`crate::cgroup`]), then
//! `sysbench run` with `--report-interval`. At each interval line the
//! server's `INNODB_METRICS` (and `Innodb_checkpoint_max_age`) are read and
//! the interval is built from them exactly as Keel's are from its metrics,
//! whose names are InnoDB's. At the end: sysbench's latency histogram,
//! `SHOW ENGINE INNODB STATUS` as the run's status, the InnoDB variables as
//! its options; then the server stops cleanly and its files are removed.
//! Ctrl-C, SIGTERM or SIGHUP during the run stop it the same way
//! ([`interrupt`]).
//!
//! What differs from Keel's runs, and so from the figures: the SQL layer
//! and sysbench's client round trips (on the same cores), undo logging and
//! MVCC, sysbench's own random data (same schema and sizes, not the same
//! rows), and a few figures InnoDB does not expose (listed in the run's
//! `summary.not_measured`). The flushing mode is derived from the
//! checkpoint age against InnoDB's marks (`sync` past
//! `Innodb_checkpoint_max_age`, `async` past `log_max_modified_age_async`,
//! else `adaptive`).

pub mod interrupt;
pub mod server;
pub mod settings;
pub mod sysbench;

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::cgroup::{Throttle, WriteLimit};
use crate::oltp::{Counts, Snapshot, DEVICE_WRITE_BYTES, PROCESS_WRITE_BYTES};
use crate::oltp::{Interval, OltpError, OltpParams, OltpReport, RunResult, Summary};
use crate::sys::BlockDevice;
use interrupt::Interrupt;
use server::{Server, Tools};

/// The engine name of these runs in the JSON.
pub const ENGINE: &str = "innodb";

/// The database sysbench's tables go in.
const DB: &str = "sbtest";

/// Figures InnoDB (or sysbench) does not give, so 0 in the JSON.
/// `buffer_flush_sync_waits` is read, but MariaDB 10.11 leaves it at 0
/// even while its writers stand still at the sync mark (seen in every
/// throttled run here), so it is not taken as a count of waits.
pub const NOT_MEASURED: &[&str] = &[
    "lat_max_ms (per interval)",
    "sync_flush_waits",
    "sync_flush_wait_ms",
    "free_check_waits",
    "free_check_wait_ms",
    "undo_records_purged",
    "undo_pages_in_pool",
    "undo_pages_written",
    "read_views_open",
    "oldest_view_age_ms",
    "undo_records_written",
    "versions_rebuilt",
    "undo_records_purged_total",
    "undo_pages_written_total",
    "other_bytes",
    "other_bytes_per_txn",
];

/// Metrics read under the same name in `INNODB_METRICS` and Keel.
const SAME_NAMES: &[&str] = &[
    "log_lsn_checkpoint_age",
    "log_max_modified_age_async",
    "buffer_pool_pages_dirty",
    "buffer_pool_pages_free",
    "buffer_pool_pages_total",
    "buffer_flush_adaptive_total_pages",
    "buffer_flush_background_total_pages",
    "buffer_LRU_batch_flush_total_pages",
    "buffer_flush_sync_total_pages",
    "buffer_flush_neighbor_total_pages",
    "buffer_flush_sync_waits",
    "buffer_pages_written",
    "os_data_reads",
    "os_data_writes",
    "trx_rseg_history_len",
    "purge_undo_log_pages",
    "purge_del_mark_records",
];

/// What to run.
#[derive(Clone, Debug)]
pub struct InnodbPlan {
    /// The workload (warm-up is not supported: sysbench's would not be
    /// sampled apart).
    pub params: OltpParams,
    /// Keel options (`key=value`), mapped to InnoDB's variables.
    pub sets: Vec<String>,
    /// Directory for the server's files (created; must be new or empty).
    pub datadir: PathBuf,
    /// Write limit on the disk of `datadir` during the measurement.
    pub throttle: WriteLimit,
    /// The run's label (default: `innodb`).
    pub label: Option<String>,
    /// Keep the server's files afterwards.
    pub keep: bool,
}

/// Progress, for the command line.
#[non_exhaustive]
pub enum InnodbEvent<'a> {
    /// A step began (starting the server, prepare, ...).
    Step(&'a str),
    /// An interval ended.
    Interval(&'a Interval),
}

/// Run the plan and return its one run as a report. Ctrl-C, SIGTERM and
/// SIGHUP are handled while it runs: they stop the run, the server and
/// sysbench, remove the server's files and return `Err(Interrupted)`.
pub fn run(
    plan: &InnodbPlan,
    on_event: &mut dyn FnMut(InnodbEvent<'_>),
) -> Result<OltpReport, OltpError> {
    run_until(plan, &Interrupt::register(), on_event)
}

/// [`run`], stopped when `interrupt` is raised.
pub fn run_until(
    plan: &InnodbPlan,
    interrupt: &Interrupt,
    on_event: &mut dyn FnMut(InnodbEvent<'_>),
) -> Result<OltpReport, OltpError> {
    let p = &plan.params;
    p.validate()?;
    if p.warmup_s > 0.0 {
        return Err(OltpError::param(
            "warmup",
            "is not supported for InnoDB (sysbench's warm-up is not sampled apart); use 0",
        ));
    }
    if p.prewarm {
        return Err(OltpError::param(
            "prewarm",
            "is not supported for InnoDB (sysbench 1.0's prewarm needs a newer driver)",
        ));
    }
    let options = settings::options(&plan.sets)?;
    let tools = Tools::find()?;
    on_event(InnodbEvent::Step("starting a private MariaDB server"));
    let mut server = Server::start(
        &tools,
        &plan.datadir,
        &settings::server_flags(&options),
        plan.keep,
        interrupt,
    )?;
    let pid = server
        .pid()
        .ok_or_else(|| OltpError::Data("the MariaDB server is not running".into()))?;
    server.query(&format!("CREATE DATABASE {DB}"))?;
    let socket = server.socket().display().to_string();
    let base = sysbench::args(p, &socket, DB);
    on_event(InnodbEvent::Step("sysbench prepare"));
    let t0 = Instant::now();
    server::run_logged(
        Command::new(&tools.sysbench).args(&base).arg("prepare"),
        &server.root().join("prepare.log"),
        interrupt,
    )?;
    // The figure `keel bench oltp` prints for its own prepare, to compare
    // loading speeds (rows and their `k_1` index, loaded by `threads`).
    let rows = p.tables as u64 * p.table_size;
    let secs = t0.elapsed().as_secs_f64();
    on_event(InnodbEvent::Step(&format!(
        "sysbench prepare loaded {rows} rows in {secs:.1} s, {:.0} rows/s",
        rows as f64 / secs.max(1e-9)
    )));
    on_event(InnodbEvent::Step("writing every dirty page"));
    flush_dirty(&server, options.max_dirty_pages_pct, interrupt)?;
    let log_capacity = options.log_file_size * options.log_files_in_group as u64;
    let throttle = if plan.throttle.is_none() {
        None
    } else {
        let t = Throttle::create(&plan.datadir, plan.throttle)?;
        t.add(pid)?;
        on_event(InnodbEvent::Step(&format!(
            "the server's writes to disk {} are limited to {}",
            t.device(),
            t.limit()
        )));
        Some(t)
    };
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
    on_event(InnodbEvent::Step("sysbench run"));
    let device = BlockDevice::of(&plan.datadir);
    let page_size = options.page_size as u64;
    let sampled = Sampled {
        pid,
        log_capacity,
        page_size,
        device: device.as_ref().ok(),
    };
    let first = sample(&server, &sampled)?;
    let mut child = Command::new(&tools.sysbench)
        .args(&base)
        .args(sysbench::run_args(p))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(OltpError::io(format!(
            "cannot run {}",
            tools.sysbench.display()
        )))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| OltpError::Data("sysbench's output is not readable".into()))?;
    let mut text = String::new();
    let mut intervals = Vec::new();
    let (mut prev, mut prev_t) = (first.clone(), 0.0);
    for line in BufReader::new(stdout).lines() {
        if interrupt.raised() {
            interrupt::kill(&mut child);
            return Err(OltpError::Interrupted);
        }
        let line = line.map_err(OltpError::io("cannot read sysbench's output"))?;
        if let Some(l) = sysbench::parse_interval(&line) {
            let now = sample(&server, &sampled)?;
            let secs = (l.t_s - prev_t).max(1e-9);
            let counts = Counts {
                transactions: (l.tps * secs).round() as u64,
                queries: (l.qps * secs).round() as u64,
                errors: (l.err_per_s * secs).round() as u64,
                lat_p95_ms: l.lat_p95_ms,
                lat_max_ms: 0.0,
            };
            let iv = Interval::new(l.t_s, secs, counts, &prev, &now);
            on_event(InnodbEvent::Interval(&iv));
            intervals.push(iv);
            (prev, prev_t) = (now, l.t_s);
        }
        text.push_str(&line);
        text.push('\n');
    }
    let stderr = Server::output_of(&mut child);
    let status = interrupt.wait(&mut child, "sysbench")?;
    drop(throttle);
    if !status.success() {
        return Err(OltpError::Data(format!(
            "sysbench run failed ({status}):\n{stderr}"
        )));
    }
    let fin = sysbench::parse_final(&text)?;
    // One row: Type, Name, Status; the status with its newlines escaped.
    let status_text = server
        .query("SHOW ENGINE INNODB STATUS")
        .map(|s| s.splitn(3, '\t').nth(2).unwrap_or("").replace("\\n", "\n"))
        .unwrap_or_default();
    let mut summary = Summary::new(&intervals, &fin.latency_us, prev_t, &first, &prev);
    if let Some(max) = fin.max_ms {
        summary.latency_ms.max = max;
    }
    summary.peak_rss_bytes = crate::sys::peak_rss_bytes_of(pid).unwrap_or(0);
    summary.not_measured = NOT_MEASURED.iter().map(|s| s.to_string()).collect();
    summary.device = crate::oltp::device_label(&device, summary.device_bytes_per_txn.is_some());
    let run_options = variables(&server)?;
    let io_capacity_max = run_options
        .get("innodb_io_capacity_max")
        .and_then(|v| v.as_str())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // MariaDB 10.11 calls it tx_isolation; 11.1 and later,
    // transaction_isolation.
    let isolation = ["tx_isolation", "transaction_isolation"]
        .iter()
        .find_map(|n| run_options.get(*n).and_then(|v| v.as_str()))
        .unwrap_or_default()
        .to_string();
    server.stop()?;
    drop(server);
    Ok(OltpReport {
        version: 1,
        preset: None,
        preset_settings: None,
        prepare_sets: Vec::new(),
        runs: vec![RunResult {
            label: plan.label.clone().unwrap_or_else(|| ENGINE.to_string()),
            engine: ENGINE.to_string(),
            options: run_options,
            io_capacity_max,
            isolation,
            workload: p.clone(),
            summary,
            intervals,
            device_changes: Vec::new(),
            option_changes: Vec::new(),
            hold_view: None,
            status: status_text,
        }],
    })
}

/// Write every dirty page: `innodb_max_dirty_pages_pct` 0 until none is
/// left (at most ten minutes), then back to `pct`.
fn flush_dirty(server: &Server, pct: f64, interrupt: &Interrupt) -> Result<(), OltpError> {
    server.query("SET GLOBAL innodb_max_dirty_pages_pct = 0")?;
    let t0 = Instant::now();
    loop {
        let out = server.query("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'")?;
        let dirty: u64 = out
            .split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if dirty == 0 || t0.elapsed().as_secs() > 600 {
            break;
        }
        interrupt.sleep(std::time::Duration::from_millis(250))?;
    }
    server.query(&format!("SET GLOBAL innodb_max_dirty_pages_pct = {pct}"))?;
    Ok(())
}

/// What [`sample`] needs besides the server.
struct Sampled<'a> {
    /// The server's process.
    pid: u32,
    log_capacity: u64,
    /// `innodb_page_size`, to turn doublewrite pages into bytes.
    page_size: u64,
    /// The block device holding the server's data directory, if any.
    device: Option<&'a BlockDevice>,
}

/// The server's metrics under Keel's names, with its pending page writes
/// (from `SHOW ENGINE INNODB STATUS`, read in the same client call), its
/// bytes written by kind of file (from its status counters, see
/// [`snapshot`]), the bytes written to the disk holding its data directory
/// and, raw, its process's `write_bytes` (see
/// [`crate::sys::process_write_bytes`]: not a figure of bytes written).
fn sample(server: &Server, p: &Sampled<'_>) -> Result<Snapshot, OltpError> {
    let out = server.query(
        "SELECT NAME, COUNT FROM information_schema.INNODB_METRICS; \
         SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_checkpoint_max_age', \
         'Innodb_data_written', 'Innodb_dblwr_pages_written'); \
         SHOW ENGINE INNODB STATUS",
    )?;
    let mut s = snapshot(&out, p.log_capacity, p.page_size);
    if let Some(b) = crate::sys::process_write_bytes(Some(p.pid)) {
        s.insert(PROCESS_WRITE_BYTES, b);
    }
    if let Some(b) = p.device.and_then(BlockDevice::written_bytes) {
        s.insert(DEVICE_WRITE_BYTES, b);
    }
    if let Some(n) = pending_writes(&out) {
        s.insert("device_write_queue_depth", n);
    }
    Ok(s)
}

/// `Pending writes: LRU 0, flush list 12` of `SHOW ENGINE INNODB STATUS`
/// (its newlines escaped as `\n` in batch mode): the page writes in flight.
fn pending_writes(status: &str) -> Option<u64> {
    const AT: &str = "Pending writes: LRU ";
    let rest = &status[status.find(AT)? + AT.len()..];
    let (lru, rest) = rest.split_once(", flush list ")?;
    let list: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some(lru.trim().parse::<u64>().ok()? + list.parse::<u64>().ok()?)
}

/// Parse `NAME\tCOUNT` lines into a snapshot under Keel's names. Bytes
/// written by kind of file: redo is `os_log_bytes_written` (InnoDB's
/// `Innodb_os_log_written`); doublewrite is `Innodb_dblwr_pages_written`
/// × the page size; data is `Innodb_data_written` less the doublewrite
/// bytes, as InnoDB writes doublewrite pages through its data-file I/O
/// and counts them there. `other` (checkpoint and header writes) is not
/// measured.
fn snapshot(out: &str, log_capacity: u64, page_size: u64) -> Snapshot {
    let mut s = Snapshot::new();
    for line in out.lines() {
        let Some((name, count)) = line.split_once('\t') else {
            continue;
        };
        let Ok(v) = count.trim().parse::<i64>() else {
            continue;
        };
        let v = v.max(0) as u64;
        if let Some(n) = SAME_NAMES.iter().find(|n| **n == name) {
            s.insert(n, v);
        } else if name == "os_log_bytes_written" {
            s.insert("log_bytes_written", v);
        } else if name == "Innodb_checkpoint_max_age" {
            s.insert("log_max_modified_age_sync", v);
        } else if name == "Innodb_data_written" {
            s.insert(INNODB_DATA_WRITTEN, v);
        } else if name == "Innodb_dblwr_pages_written" {
            s.insert("dblwr_pages_written", v);
        }
    }
    if let Some(dblwr) = s.get("dblwr_pages_written").map(|n| n * page_size) {
        s.insert("dblwr_written_bytes", dblwr);
        if let Some(all) = s.remove(INNODB_DATA_WRITTEN) {
            s.insert("os_data_written_bytes", all.saturating_sub(dblwr));
        }
    }
    s.remove(INNODB_DATA_WRITTEN);
    s.insert("log_capacity", log_capacity);
    let age = s.get("log_lsn_checkpoint_age").copied().unwrap_or(0);
    let sync = s
        .get("log_max_modified_age_sync")
        .copied()
        .unwrap_or(u64::MAX);
    let async_ = s
        .get("log_max_modified_age_async")
        .copied()
        .unwrap_or(u64::MAX);
    let mode = if age >= sync {
        keel::FlushMode::Sync
    } else if age >= async_ {
        keel::FlushMode::Async
    } else {
        keel::FlushMode::Adaptive
    };
    s.insert("buffer_flush_mode", mode.code());
    s
}

/// `Innodb_data_written` while a snapshot is parsed (data and doublewrite
/// bytes together).
const INNODB_DATA_WRITTEN: &str = "Innodb_data_written";

/// The mapped InnoDB variables and the server's version, as the run's options.
fn variables(server: &Server) -> Result<serde_json::Map<String, serde_json::Value>, OltpError> {
    let names: Vec<String> = settings::reported_variables()
        .into_iter()
        .chain(["version"])
        .map(|n| format!("'{n}'"))
        .collect();
    let out = server.query(&format!(
        "SHOW GLOBAL VARIABLES WHERE Variable_name IN ({})",
        names.join(",")
    ))?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string())))
        .collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn innodb_metrics_become_keel_names_and_the_mode_follows_the_marks() {
        let out = "log_lsn_checkpoint_age\t900\nlog_max_modified_age_async\t800\n\
                   os_log_bytes_written\t12345\nbuffer_flush_sync_waits\t7\n\
                   buffer_pool_pages_misc\t3\nInnodb_checkpoint_max_age\t1000\nbad line\n\
                   Innodb_data_written\t1000000\nInnodb_dblwr_pages_written\t10\n";
        let s = snapshot(out, 2000, 16384);
        assert_eq!(s["log_lsn_checkpoint_age"], 900);
        assert_eq!(s["log_bytes_written"], 12345);
        assert_eq!(s["log_max_modified_age_sync"], 1000);
        assert_eq!(s["buffer_flush_sync_waits"], 7);
        assert_eq!(s["log_capacity"], 2000);
        assert_eq!(s["dblwr_written_bytes"], 163_840);
        assert_eq!(s["os_data_written_bytes"], 1_000_000 - 163_840);
        assert!(!s.contains_key(INNODB_DATA_WRITTEN));
        assert!(!s.contains_key("buffer_pool_pages_misc"));
        assert_eq!(s["buffer_flush_mode"], keel::FlushMode::Async.code());
        let s = snapshot(
            "log_lsn_checkpoint_age\t1000\nInnodb_checkpoint_max_age\t1000\n",
            1,
            16384,
        );
        assert_eq!(
            pending_writes("x\\nPending writes: LRU 2, flush list 12\\nPages made young"),
            Some(14)
        );
        assert_eq!(pending_writes("Pending writes: none"), None);
        assert_eq!(s["buffer_flush_mode"], keel::FlushMode::Sync.code());
    }
}
