//! `prepare`: create `sbtest1..N` and their `k` indexes and load them, one
//! loader thread per table (at most `threads`), in transactions of
//! `BATCH_ROWS` rows. `prewarm`: read them all into the buffer pool before
//! a run, as sysbench's `prewarm` command does.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use keel::{Db, Error};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::rows::{index_key, index_name, primary_key, table_name, Row};
use super::workload::open_tables;
use super::{OltpError, OltpParams};

/// Rows per loading transaction: large enough that commits are not the
/// bottleneck, small enough that a batch's redo (rows plus index entries,
/// about 1 KB a row) fits easily in the smallest logs the tests use (2 MiB).
const BATCH_ROWS: u64 = 100;
/// How often progress is reported.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// True if `db` holds every table and index of `params` with its first and
/// last row (the delete + insert of read_write keeps every id present).
pub fn has_tables(db: &Db, params: &OltpParams) -> Result<bool, OltpError> {
    let names = db.table_names()?;
    for n in 1..=params.tables {
        if !names.contains(&table_name(n)) || !names.contains(&index_name(n)) {
            return Ok(false);
        }
        let t = db.table(&table_name(n))?;
        for id in [1, params.table_size] {
            if t.get(&primary_key(id))?.is_none() {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// The random generator of table `n`'s rows: the same seed gives the same data.
pub(crate) fn table_rng(seed: u64, n: usize) -> SmallRng {
    SmallRng::seed_from_u64(seed ^ (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// Create and load the tables; `progress(rows_done, rows_total)` is called
/// from this thread about four times a second and once at the end.
/// Returns the rows loaded.
pub fn prepare(
    db: &Db,
    params: &OltpParams,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<u64, OltpError> {
    params.validate()?;
    let total = params.tables as u64 * params.table_size;
    let done = AtomicU64::new(0);
    let next_table = AtomicUsize::new(1);
    let failed = AtomicBool::new(false);
    let loaders = params.threads.min(params.tables).max(1);
    std::thread::scope(|s| -> Result<(), OltpError> {
        let hs: Vec<_> = (0..loaders)
            .map(|_| {
                s.spawn(|| -> Result<(), Error> {
                    let r = load_tables(db, params, &next_table, &done, &failed);
                    if r.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        let mut last = Instant::now();
        while !hs.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(20));
            if last.elapsed() >= PROGRESS_EVERY {
                progress(done.load(Ordering::Relaxed), total);
                last = Instant::now();
            }
        }
        for h in hs {
            h.join().map_err(|_| OltpError::WorkerPanicked)??;
        }
        Ok(())
    })?;
    progress(done.load(Ordering::Relaxed), total);
    Ok(done.load(Ordering::Relaxed))
}

fn load_tables(
    db: &Db,
    params: &OltpParams,
    next_table: &AtomicUsize,
    done: &AtomicU64,
    failed: &AtomicBool,
) -> Result<(), Error> {
    loop {
        let n = next_table.fetch_add(1, Ordering::Relaxed);
        if n > params.tables || failed.load(Ordering::Relaxed) {
            return Ok(());
        }
        let t = db.table_or_create(&table_name(n))?;
        let ix = db.table_or_create(&index_name(n))?;
        let mut rng = table_rng(params.seed, n);
        let k_max = params.table_size.min(u32::MAX as u64) as u32;
        let mut id = 1;
        while id <= params.table_size {
            let end = (id + BATCH_ROWS - 1).min(params.table_size);
            let mut tx = db.begin();
            for i in id..=end {
                let row = Row::random(rng.gen_range(1..=k_max), &mut rng);
                tx.put(&t, &primary_key(i), &row.encode())?;
                tx.put(&ix, &index_key(row.k, i), &[])?;
            }
            tx.commit()?;
            done.fetch_add(end - id + 1, Ordering::Relaxed);
            id = end + 1;
            if failed.load(Ordering::Relaxed) {
                return Ok(());
            }
        }
    }
}

/// Read every row of every table and of its `k` index, one reader thread
/// per table (at most `threads`), so that a run starts with its data in
/// the buffer pool as far as it fits: sysbench's `prewarm` command, which
/// scans each table by its primary key and by `k_1`. Nothing is written.
/// Returns the entries read (rows plus index entries).
pub fn prewarm(db: &Db, params: &OltpParams) -> Result<u64, OltpError> {
    params.validate()?;
    let tables = open_tables(db, params)?;
    let read = AtomicU64::new(0);
    let next_table = AtomicUsize::new(0);
    let readers = params.threads.min(params.tables).max(1);
    std::thread::scope(|s| -> Result<(), OltpError> {
        let hs: Vec<_> = (0..readers)
            .map(|_| {
                s.spawn(|| -> Result<(), Error> {
                    while let Some(t) = tables.get(next_table.fetch_add(1, Ordering::Relaxed)) {
                        for tree in t.trees() {
                            let mut rows = 0;
                            for row in tree.range(..)? {
                                row?;
                                rows += 1;
                            }
                            read.fetch_add(rows, Ordering::Relaxed);
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        for h in hs {
            h.join().map_err(|_| OltpError::WorkerPanicked)??;
        }
        Ok(())
    })?;
    Ok(read.load(Ordering::Relaxed))
}
