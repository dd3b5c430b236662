//! Group commit, measured on the real disk: commits/s and redo log syncs
//! (`os_log_fsyncs`) per commit at 1, 8 and 32 committing threads, for
//! `flush_log_at_trx_commit` 1 and 2.
//!
//! Each configuration opens a fresh database in a temporary directory with
//! the default `flush_method` (real fdatasyncs), lets every thread commit
//! one-row transactions (`Table::put`, each thread on its own keys, so no
//! row-lock waits) for a short warm-up, then counts for `--time` seconds.
//!
//! ```text
//! cargo bench -p keel --bench group_commit -- [--time SECS] [--threads 1,8,32]
//!     [--trx-commit 1,2] [--dir DIR] [--repeat N]
//! ```
//!
//! `--dir` (or `KEEL_BENCH_DIR`) chooses where the temporary directories go
//! (default: the system's temp dir, which must be on the disk to measure,
//! not a tmpfs); `KEEL_BENCH_TIME` sets the default of `--time` (2 s).
//! With `--repeat N` every configuration runs N times and the median and
//! the spread (min–max) are printed as well. `--sync-delay-us US` measures
//! a modelled disk instead, whose log syncs each take `US` microseconds
//! (the faulty in-memory file system; every other I/O is instant): a fast
//! NVMe drive's figures on a machine that has none.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel::io::faulty::FaultyFs;
use keel::{Db, Options};

struct Args {
    time: Duration,
    threads: Vec<usize>,
    trx_commit: Vec<u8>,
    dir: Option<PathBuf>,
    repeat: usize,
    /// Model the disk instead: the faulty in-memory file system, every
    /// log sync taking this long.
    sync_delay: Option<Duration>,
}

fn list<T: std::str::FromStr>(s: &str) -> Vec<T> {
    s.split(',')
        .map(|x| {
            x.trim()
                .parse()
                .unwrap_or_else(|_| panic!("bad list item {x:?}"))
        })
        .collect()
}

fn args() -> Args {
    let secs = std::env::var("KEEL_BENCH_TIME")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(2.0);
    let mut a = Args {
        time: Duration::from_secs_f64(secs),
        threads: vec![1, 8, 32],
        trx_commit: vec![1, 2],
        dir: std::env::var_os("KEEL_BENCH_DIR").map(PathBuf::from),
        repeat: 1,
        sync_delay: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--time" => a.time = Duration::from_secs_f64(value().parse().unwrap()),
            "--threads" => a.threads = list(&value()),
            "--trx-commit" => a.trx_commit = list(&value()),
            "--dir" => a.dir = Some(PathBuf::from(value())),
            "--repeat" => a.repeat = value().parse().unwrap(),
            "--sync-delay-us" => {
                a.sync_delay = Some(Duration::from_micros(value().parse().unwrap()))
            }
            // What cargo passes to every bench target.
            "--bench" => {}
            other => panic!("unknown argument {other:?}"),
        }
    }
    a
}

struct Figures {
    commits_per_s: f64,
    syncs_per_commit: f64,
}

fn run(a: &Args, threads: usize, trx_commit: u8) -> Figures {
    let dir = match &a.dir {
        Some(d) => tempfile::tempdir_in(d),
        None => tempfile::tempdir(),
    }
    .unwrap();
    let opts = Options {
        flush_log_at_trx_commit: trx_commit,
        ..Default::default()
    };
    let (db, _slow_syncs) = match a.sync_delay {
        None => (Db::open(dir.path(), opts).unwrap(), None),
        Some(d) => {
            let fs = Arc::new(FaultyFs::new());
            let spec = format!("/redo-.sync:delay={}us", d.as_micros());
            let slow = fs.arm(&spec, 0).unwrap();
            let db = Db::open_with_fs(dir.path(), opts, Some(fs)).unwrap();
            (db, Some(slow))
        }
    };
    let t = db.create_table("t").unwrap();
    let commits = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..threads as u32)
        .map(|id| {
            let (t, commits, stop) = (t.clone(), commits.clone(), stop.clone());
            std::thread::spawn(move || {
                let value = [0x5au8; 100];
                let mut i = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    // Each thread updates its own 1000 keys.
                    let key = (id * 1000 + i % 1000).to_be_bytes();
                    t.put(&key, &value).unwrap();
                    commits.fetch_add(1, Ordering::Relaxed);
                    i = i.wrapping_add(1);
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let syncs = || db.metrics().get("os_log_fsyncs").unwrap();
    let (c0, s0, t0) = (commits.load(Ordering::Relaxed), syncs(), Instant::now());
    std::thread::sleep(a.time);
    let (c1, s1, took) = (commits.load(Ordering::Relaxed), syncs(), t0.elapsed());
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    drop(t);
    db.close().unwrap();
    let n = (c1 - c0).max(1) as f64;
    Figures {
        commits_per_s: n / took.as_secs_f64(),
        syncs_per_commit: (s1 - s0) as f64 / n,
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let a = args();
    println!(
        "group commit: {:?} per run, {} run(s) per configuration, dir {}",
        a.time,
        a.repeat,
        a.dir.clone().unwrap_or_else(std::env::temp_dir).display()
    );
    println!(
        "{:>10} {:>7} {:>12} {:>14} {:>17} {:>10}",
        "trx_commit", "threads", "commits/s", "syncs/commit", "commits/s spread", "vs 1 thr"
    );
    for &trx in &a.trx_commit {
        let mut one_thread = None;
        for &threads in &a.threads {
            let runs: Vec<Figures> = (0..a.repeat).map(|_| run(&a, threads, trx)).collect();
            let mut cps: Vec<f64> = runs.iter().map(|f| f.commits_per_s).collect();
            let mut spc: Vec<f64> = runs.iter().map(|f| f.syncs_per_commit).collect();
            let (lo, hi) = (
                cps.iter().cloned().fold(f64::INFINITY, f64::min),
                cps.iter().cloned().fold(0.0, f64::max),
            );
            let cps_med = median(&mut cps);
            let spc_med = median(&mut spc);
            if threads == 1 {
                one_thread = Some(cps_med);
            }
            let ratio = one_thread.map_or("-".to_string(), |b| format!("{:.2}x", cps_med / b));
            println!(
                "{trx:>10} {threads:>7} {cps_med:>12.0} {spc_med:>14.3} {:>17} {ratio:>10}",
                format!("{lo:.0}-{hi:.0}")
            );
        }
    }
}
