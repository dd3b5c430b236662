//! Loading speed: rows per second of `Table::bulk_load` against the same
//! rows put in transactions of 100 rows (the way a loader without a bulk
//! path loads), side by side in one run.
//!
//! ```text
//! cargo bench -p keel --bench bulk_load                    # 1,000,000 rows, 3 runs
//! KEEL_BULK_BENCH_ROWS=200000 KEEL_BULK_BENCH_RUNS=5 cargo bench -p keel --bench bulk_load
//! ```
//!
//! The rows are sysbench's: an 8-byte big-endian id and a 184-byte value
//! (`k`, `c`, `pad`), in id order. Each run loads a fresh table in a fresh
//! database (16 KiB pages, a pool larger than the table, the default log,
//! `flush_log_at_trx_commit = 2` for the transactions so they do not wait
//! for one sync each) on one thread; the bulk load's time includes its
//! final log sync. The runs alternate the two ways, and the figures are the
//! median and spread (min..max) of each, and the median of the per-run
//! ratios. `prepare` of `keel bench oltp` loads its tables this way, one
//! table per thread.

use std::time::Instant;

use keel::{Db, Options};

const VALUE: usize = 184;

type Res<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() {
    if let Err(e) = run() {
        eprintln!("bulk_load bench: {e}");
        std::process::exit(1);
    }
}

fn env_num(name: &str, default: u64) -> Res<u64> {
    match std::env::var(name) {
        Ok(v) => Ok(v.trim().parse().map_err(|e| format!("{name}={v}: {e}"))?),
        Err(_) => Ok(default),
    }
}

fn row(id: u64) -> (Vec<u8>, Vec<u8>) {
    let mut v = vec![0u8; VALUE];
    for (i, b) in v.iter_mut().enumerate() {
        *b = b'0' + ((id.wrapping_mul(31) + i as u64 * 7) % 10) as u8;
    }
    (id.to_be_bytes().to_vec(), v)
}

fn options() -> Options {
    Options {
        buffer_pool_size: 1 << 30,
        flush_log_at_trx_commit: 2,
        ..Options::default()
    }
}

/// Seconds to load `rows` rows one way, in a fresh database.
fn load(bulk: bool, rows: u64) -> Res<f64> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), options())?;
    let t = db.create_table("sbtest1")?;
    let start = Instant::now();
    if bulk {
        let n = t.bulk_load((1..=rows).map(row))?;
        assert_eq!(n, rows);
    } else {
        let mut id = 1;
        while id <= rows {
            let mut tx = db.begin();
            for i in id..(id + 100).min(rows + 1) {
                let (k, v) = row(i);
                tx.put(&t, &k, &v)?;
            }
            tx.commit()?;
            id += 100;
        }
        db.flush_log()?;
    }
    let secs = start.elapsed().as_secs_f64();
    db.close()?;
    Ok(secs)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn run() -> Res<()> {
    let rows = env_num("KEEL_BULK_BENCH_ROWS", 1_000_000)?.max(1);
    let runs = env_num("KEEL_BULK_BENCH_RUNS", 3)?.max(1) as usize;
    println!("bulk_load bench: {rows} rows of 8 + {VALUE} bytes, {runs} runs of each way");
    let (mut bulk, mut txns, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for r in 1..=runs {
        let b = rows as f64 / load(true, rows)?;
        let t = rows as f64 / load(false, rows)?;
        println!("run {r}: bulk_load {b:.0} rows/s, transactions of 100 rows {t:.0} rows/s");
        bulk.push(b);
        txns.push(t);
        ratio.push(b / t);
    }
    let spread = |v: &[f64]| {
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(0.0, f64::max);
        format!("{min:.0}..{max:.0}")
    };
    let (sb, st) = (spread(&bulk), spread(&txns));
    println!(
        "bulk_load: {:.0} rows/s ({sb}); transactions: {:.0} rows/s ({st}); ratio {:.1}x",
        median(&mut bulk),
        median(&mut txns),
        median(&mut ratio)
    );
    Ok(())
}
