//! `prepare`: create `sbtest1..N` and their `k` indexes and load them, one
//! loader thread per table (at most `threads`) as sysbench does, through
//! any engine (the same seed gives the same rows in every engine): the rows
//! in id order, then the index from its entries sorted, as sysbench
//! creates `k_1` after the rows, each by the engine's fastest way of
//! loading sorted data (`Database::load_sorted`: Keel's bulk load, other
//! engines' batched transactions). `prewarm`: read them all into the cache
//! before a run, as sysbench's `prewarm` command does. A loader waits only
//! inside the engine.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::engine::{Database, DbError, Span, TreeId};
use super::rows::{index_key, index_name, primary_key, table_name, Row};
use super::workload::open_tables;
use super::{OltpError, OltpParams};

/// How often progress is reported.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// True if `db` holds every table and index of `params` with its first and
/// last row (the delete + insert of read_write keeps every id present).
pub fn has_tables(db: &dyn Database, params: &OltpParams) -> Result<bool, OltpError> {
    let mut session = db.session()?;
    for n in 1..=params.tables {
        let (Some(t), Some(_)) = (
            db.tree(&table_name(n), false)?,
            db.tree(&index_name(n), false)?,
        ) else {
            return Ok(false);
        };
        let mut tx = session.begin(false)?;
        for id in [1, params.table_size] {
            if tx.get(t, &primary_key(id))?.is_none() {
                return Ok(false);
            }
        }
        tx.commit()?;
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
    db: &dyn Database,
    params: &OltpParams,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<u64, OltpError> {
    params.validate()?;
    let total = params.tables as u64 * params.table_size;
    // Entries loaded: each row counts twice, once for itself and once for
    // its index entry, so progress reaches 100 % when the indexes are
    // loaded too; rows are reported as half of it.
    let done = AtomicU64::new(0);
    let next_table = AtomicUsize::new(1);
    let failed = AtomicBool::new(false);
    let loaders = params.threads.min(params.tables).max(1);
    std::thread::scope(|s| -> Result<(), OltpError> {
        let hs: Vec<_> = (0..loaders)
            .map(|_| {
                s.spawn(|| -> Result<(), DbError> {
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
                progress(done.load(Ordering::Relaxed) / 2, total);
                last = Instant::now();
            }
        }
        for h in hs {
            h.join().map_err(|_| OltpError::WorkerPanicked)??;
        }
        Ok(())
    })?;
    progress(done.load(Ordering::Relaxed) / 2, total);
    Ok(done.load(Ordering::Relaxed) / 2)
}

fn load_tables(
    db: &dyn Database,
    params: &OltpParams,
    next_table: &AtomicUsize,
    done: &AtomicU64,
    failed: &AtomicBool,
) -> Result<(), DbError> {
    let mut session = db.session()?;
    loop {
        let n = next_table.fetch_add(1, Ordering::Relaxed);
        if n > params.tables || failed.load(Ordering::Relaxed) {
            return Ok(());
        }
        let t = created(db, &table_name(n))?;
        let ix = created(db, &index_name(n))?;
        let mut rng = table_rng(params.seed, n);
        let k_max = params.table_size.min(u32::MAX as u64) as u32;
        // The rows in id order, their `k` entries collected for the index,
        // each as `k << 32 | id` (ids fit in 32 bits, as `validate` checks:
        // 8 bytes an entry, 64 MiB for 8 loaders of 1 M rows).
        let mut entries: Vec<u64> = Vec::with_capacity(params.table_size as usize);
        let mut rows = (1..=params.table_size)
            .take_while(|_| !failed.load(Ordering::Relaxed))
            .map(|id| {
                let row = Row::random(rng.gen_range(1..=k_max), &mut rng);
                entries.push(u64::from(row.k) << 32 | id);
                (primary_key(id).to_vec(), row.encode().to_vec())
            });
        let mut count = |k| {
            done.fetch_add(k, Ordering::Relaxed);
        };
        db.load_sorted(&mut *session, t, &mut rows, &mut count)?;
        if failed.load(Ordering::Relaxed) {
            return Ok(());
        }
        // The secondary index from its entries sorted, as sysbench creates
        // `k_1` after loading the rows.
        entries.sort_unstable();
        let mut index = entries.into_iter().map(|e| {
            (
                index_key((e >> 32) as u32, e & 0xffff_ffff).to_vec(),
                Vec::new(),
            )
        });
        db.load_sorted(&mut *session, ix, &mut index, &mut count)?;
    }
}

/// The tree `name` of `db`, created if needed.
fn created(db: &dyn Database, name: &str) -> Result<TreeId, DbError> {
    db.tree(name, true)?
        .ok_or_else(|| DbError::fatal(db.engine().name(), format!("create {name}"), "not created"))
}

/// Read every row of every table and of its `k` index, one reader thread
/// per table (at most `threads`), so that a run starts with its data in
/// the buffer pool as far as it fits: sysbench's `prewarm` command, which
/// scans each table by its primary key and by `k_1`. Nothing is written.
/// Returns the entries read (rows plus index entries).
pub fn prewarm(db: &dyn Database, params: &OltpParams) -> Result<u64, OltpError> {
    params.validate()?;
    let tables = open_tables(db, params)?;
    let read = AtomicU64::new(0);
    let next_table = AtomicUsize::new(0);
    let readers = params.threads.min(params.tables).max(1);
    std::thread::scope(|s| -> Result<(), OltpError> {
        let hs: Vec<_> = (0..readers)
            .map(|_| {
                s.spawn(|| -> Result<(), DbError> {
                    let mut session = db.session()?;
                    while let Some(t) = tables.get(next_table.fetch_add(1, Ordering::Relaxed)) {
                        for tree in t.trees() {
                            let mut tx = session.begin(false)?;
                            let rows = tx.range(tree, Span::ALL, &mut |_, _| {})?;
                            tx.commit()?;
                            read.fetch_add(rows as u64, Ordering::Relaxed);
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
