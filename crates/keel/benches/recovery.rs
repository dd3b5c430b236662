//! Recovery speed: MiB of redo replayed per second by `Db::open` after a
//! crash.
//!
//! ```text
//! cargo bench -p keel --bench recovery                 # 256 MiB of redo
//! cargo bench -p keel --bench recovery -- 256MiB 1GiB  # both sizes
//! KEEL_RECOVERY_BENCH_REDO=1GiB cargo bench -p keel --bench recovery
//! ```
//!
//! For each size: a table of `KEEL_RECOVERY_BENCH_ROWS` rows (default
//! 200 000, 200-byte values, about 6 000 pages of 16 KiB) is loaded and
//! checkpointed (every page on disk), then rows are updated at random (one
//! write in ten inserts a new key) until the wanted redo lies beyond the
//! checkpoint, and the database crashes (`Db::simulate_crash`, after the
//! log is written). The checkpoint is held back without any test hook:
//! the buffer pool (`KEEL_RECOVERY_BENCH_POOL`, default 256 MiB) holds
//! every page, so nothing is evicted, and the `classic` policy flushes
//! nothing while there is redo: neither the dirty-page percentage (99 %, no
//! low-water mark) nor the age (the log is 1.5 × the redo, so the age stays
//! below the async mark) asks for it. The run says so if the checkpoint
//! moved anyway.
//!
//! That crashed image is kept, and each of `KEEL_RECOVERY_BENCH_RUNS`
//! (default 3) runs copies it, syncs the copy (so that the data files'
//! `O_DIRECT` reads meet no dirty page cache and go to the disk; the log is
//! read through the page cache), and times `Db::open` with the same
//! options. The redo replayed is the `recovery_redo_bytes` metric; the
//! figures are MiB of it per second of the whole `Db::open` (allocating
//! the pool, the doublewrite check, redo, finishing interrupted commits)
//! and per second of the redo phase alone (`recovery_time_ms`), median and
//! spread (min..max) of the runs.
//!
//! `KEEL_RECOVERY_BENCH_DIR` chooses where the databases go (default: a
//! temporary directory); with it set, the crashed image of each size is
//! kept there (`golden-…`) and reused by later runs, which then skip the
//! writing: for profiling `Db::open` alone. A larger
//! `KEEL_RECOVERY_BENCH_ROWS` (with a pool to match) makes redo read more
//! pages that are not in the pool.

use std::path::{Path, PathBuf};
use std::time::Instant;

use keel::{Db, Options};

const VALUE: usize = 200;

fn main() {
    if let Err(e) = run() {
        eprintln!("recovery bench: {e}");
        std::process::exit(1);
    }
}

type Res<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn run() -> Res<()> {
    // `cargo bench` passes `--bench` (and a filter, if any): sizes are the
    // arguments that parse as sizes.
    let mut sizes: Vec<u64> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .filter_map(|a| Options::parse_size(&a).ok())
        .collect();
    if sizes.is_empty() {
        let spec = std::env::var("KEEL_RECOVERY_BENCH_REDO").unwrap_or_else(|_| "256MiB".into());
        for s in spec.split(',').filter(|s| !s.trim().is_empty()) {
            sizes.push(Options::parse_size(s.trim()).map_err(|e| format!("size {s:?}: {e}"))?);
        }
    }
    let runs: usize = env_num("KEEL_RECOVERY_BENCH_RUNS", 3)?.max(1) as usize;
    let rows = env_num("KEEL_RECOVERY_BENCH_ROWS", 200_000)?;
    let pool = match std::env::var("KEEL_RECOVERY_BENCH_POOL") {
        Ok(v) => {
            Options::parse_size(&v).map_err(|e| format!("KEEL_RECOVERY_BENCH_POOL={v}: {e}"))?
        }
        Err(_) => 256 << 20,
    };
    let (_tmp, root, keep) = match std::env::var_os("KEEL_RECOVERY_BENCH_DIR") {
        Some(d) => {
            let d = PathBuf::from(d);
            std::fs::create_dir_all(&d)?;
            (None, d, true)
        }
        None => {
            let t = tempfile::tempdir()?;
            let p = t.path().to_path_buf();
            (Some(t), p, false)
        }
    };
    println!(
        "recovery bench: {rows} rows of {VALUE}-byte values, a {} MiB pool, {runs} runs per size, in {}",
        pool >> 20,
        root.display()
    );
    for redo in sizes {
        bench_size(&root, redo, rows, pool, runs, keep)?;
    }
    Ok(())
}

fn env_num(name: &str, default: u64) -> Res<u64> {
    match std::env::var(name) {
        Ok(v) => Ok(v.trim().parse().map_err(|e| format!("{name}={v}: {e}"))?),
        Err(_) => Ok(default),
    }
}

fn options(redo: u64, pool: u64) -> Res<Options> {
    let mut o = Options {
        // Every page of the table and of what the updates dirty stays in
        // the pool: nothing is evicted, so nothing is written.
        buffer_pool_size: pool,
        log_files_in_group: 2,
        // 1.5 × the redo: the age stays below the async mark.
        log_file_size: (redo * 3 / 4).next_multiple_of(1 << 20).max(8 << 20),
        flush_log_at_trx_commit: 2,
        ..Options::default()
    };
    o.set("flush_policy", "classic")?;
    o.adaptive_flushing = false;
    o.max_dirty_pages_pct = 99.0;
    o.max_dirty_pages_pct_lwm = 0.0;
    o.io_capacity = 100;
    Ok(o)
}

fn size_name(b: u64) -> String {
    if b.is_multiple_of(1 << 30) {
        format!("{}GiB", b >> 30)
    } else {
        format!("{}MiB", b >> 20)
    }
}

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

/// Values that differ from row to row and from write to write.
fn value(key: u64, round: u64) -> Vec<u8> {
    let mut v = vec![0u8; VALUE];
    let mut x = key.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ round;
    for c in v.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        c.copy_from_slice(&b[..c.len()]);
    }
    v
}

/// Build the crashed image of `redo` bytes in `dir`; returns the redo
/// beyond the checkpoint at the crash.
fn prepare(dir: &Path, redo: u64, rows: u64, opts: &Options) -> Res<u64> {
    let t0 = Instant::now();
    let db = Db::open(dir, opts.clone())?;
    let t = db.create_table("t")?;
    let mut k = 0u64;
    while k < rows {
        let mut txn = db.begin();
        for key in k..(k + 1000).min(rows) {
            txn.put(&t, &key.to_be_bytes(), &value(key, 0))?;
        }
        txn.commit()?;
        k = (k + 1000).min(rows);
    }
    db.flush()?;
    let m = db.metrics();
    let ckpt = m.get("log_lsn_last_checkpoint").unwrap_or(0);
    let loaded = t0.elapsed();
    // xorshift: the keys to update.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next_new = rows;
    let mut n = 0u64;
    while m.get("log_lsn_current").unwrap_or(0) - ckpt < redo {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        n += 1;
        let key = if x.is_multiple_of(10) {
            next_new += 1;
            next_new - 1
        } else {
            (x >> 8) % rows
        };
        t.put(&key.to_be_bytes(), &value(key, n))?;
    }
    let now_ckpt = m.get("log_lsn_last_checkpoint").unwrap_or(0);
    let beyond = m.get("log_lsn_current").unwrap_or(0) - now_ckpt;
    if now_ckpt != ckpt {
        println!(
            "  note: the checkpoint moved during the writes ({} MiB); {:.1} MiB remain beyond it",
            mib(now_ckpt - ckpt) as u64,
            mib(beyond)
        );
    }
    db.flush_log()?;
    drop(t);
    db.simulate_crash();
    println!(
        "  prepared in {:.1} s (load {:.1} s, {n} writes): {:.1} MiB of redo beyond the checkpoint",
        t0.elapsed().as_secs_f64(),
        loaded.as_secs_f64(),
        mib(beyond)
    );
    Ok(beyond)
}

fn copy_dir(from: &Path, to: &Path) -> Res<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        if e.file_type()?.is_file() {
            let dst = to.join(e.file_name());
            std::fs::copy(e.path(), &dst)?;
            std::fs::File::open(&dst)?.sync_all()?;
        }
    }
    Ok(())
}

struct Run {
    redo: u64,
    open_s: f64,
    redo_s: f64,
    pages: u64,
    read_ahead: u64,
    records: u64,
}

fn bench_size(root: &Path, redo: u64, rows: u64, pool: u64, runs: usize, keep: bool) -> Res<()> {
    let name = size_name(redo);
    println!("{name} of redo:");
    let opts = options(redo, pool)?;
    let golden = root.join(format!("golden-{name}-{rows}-{}MiB", pool >> 20));
    let done = golden.join("crashed");
    if !(keep && done.exists()) {
        if golden.exists() {
            std::fs::remove_dir_all(&golden)?;
        }
        prepare(&golden, redo, rows, &opts)?;
        std::fs::write(&done, b"")?;
    } else {
        println!("  reusing the crashed image in {}", golden.display());
    }
    let mut res = Vec::new();
    for i in 0..runs {
        let dir = root.join(format!("run-{name}"));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        copy_dir(&golden, &dir)?;
        let t0 = Instant::now();
        let db = Db::open(&dir, opts.clone())?;
        let open_s = t0.elapsed().as_secs_f64();
        let m = db.metrics();
        let r = Run {
            redo: m.get("recovery_redo_bytes").unwrap_or(0),
            open_s,
            redo_s: m.get("recovery_time_ms").unwrap_or(0) as f64 / 1000.0,
            pages: m.get("recovery_pages_touched").unwrap_or(0),
            read_ahead: m.get("recovery_pages_read_ahead").unwrap_or(0),
            records: m.get("recovery_page_records_applied").unwrap_or(0),
        };
        db.close()?;
        std::fs::remove_dir_all(&dir)?;
        println!(
            "  run {}: {:.1} MiB replayed, open {:.3} s ({:.0} MiB/s), redo phase {:.3} s ({:.0} MiB/s), \
             {} page records applied to {} pages ({} read ahead)",
            i + 1,
            mib(r.redo),
            r.open_s,
            mib(r.redo) / r.open_s,
            r.redo_s,
            mib(r.redo) / r.redo_s.max(1e-3),
            r.records,
            r.pages,
            r.read_ahead
        );
        res.push(r);
    }
    let stat = |f: &dyn Fn(&Run) -> f64| {
        let mut v: Vec<f64> = res.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    let (om, olo, ohi) = stat(&|r| mib(r.redo) / r.open_s);
    let (rm, rlo, rhi) = stat(&|r| mib(r.redo) / r.redo_s.max(1e-3));
    println!(
        "  {name}: Db::open {om:.0} MiB/s (median of {runs}; {olo:.0}..{ohi:.0}), \
         redo phase {rm:.0} MiB/s ({rlo:.0}..{rhi:.0})"
    );
    if !keep {
        std::fs::remove_dir_all(&golden)?;
    }
    Ok(())
}
