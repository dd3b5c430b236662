//! Durability figures: commit rate by `flush_log_at_trx_commit` and thread
//! count (group commit), and recovery time for a given amount of redo.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use keel::{Db, Options, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Result of one commit-rate run.
#[derive(Clone, Debug)]
pub struct CommitRate {
    /// `flush_log_at_trx_commit`.
    pub trx_commit: u8,
    /// Client threads.
    pub threads: usize,
    /// Commits completed.
    pub commits: u64,
    /// Commits per second.
    pub per_s: f64,
    /// Log syncs per commit (below 1 with group commit).
    pub fsyncs_per_commit: f64,
}

/// Run one-row commits (autocommit puts of 100-byte values on random keys,
/// each thread in its own key range so no row lock is contended) for
/// `time` on `threads` threads against a new database in `dir`.
pub fn commit_rate(
    dir: &Path,
    mut opts: Options,
    trx_commit: u8,
    threads: usize,
    time: Duration,
) -> Result<CommitRate> {
    opts.flush_log_at_trx_commit = trx_commit;
    let db = Db::open(dir, opts)?;
    let t = db.table_or_create("commits")?;
    let stop = AtomicBool::new(false);
    let commits = AtomicU64::new(0);
    let fsyncs0 = db.metrics().get("os_log_fsyncs").unwrap_or(0);
    let started = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let hs: Vec<_> = (0..threads)
            .map(|w| {
                let (t, stop, commits) = (&t, &stop, &commits);
                s.spawn(move || -> Result<()> {
                    let mut rng = SmallRng::seed_from_u64(w as u64);
                    let v = [0x5au8; 100];
                    while !stop.load(Ordering::Relaxed) {
                        let k = ((w as u64) << 40) | rng.gen_range(0..1_000_000u64);
                        t.put(&k.to_be_bytes(), &v)?;
                        commits.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(())
                })
            })
            .collect();
        std::thread::sleep(time);
        stop.store(true, Ordering::Relaxed);
        for h in hs {
            h.join()
                .map_err(|_| keel::Error::Corruption("commit worker panicked".into()))??;
        }
        Ok(())
    })?;
    let secs = started.elapsed().as_secs_f64();
    let n = commits.load(Ordering::Relaxed);
    let fsyncs = db.metrics().get("os_log_fsyncs").unwrap_or(0) - fsyncs0;
    drop(t);
    db.close()?;
    Ok(CommitRate {
        trx_commit,
        threads,
        commits: n,
        per_s: n as f64 / secs,
        fsyncs_per_commit: fsyncs as f64 / n.max(1) as f64,
    })
}

/// Result of a recovery-time run.
#[derive(Clone, Debug)]
pub struct RecoveryTime {
    /// Bytes of redo between the checkpoint and the end of the log at the crash.
    pub redo_bytes: u64,
    /// Rows written before the crash.
    pub rows: u64,
    /// Milliseconds `Db::open` spent recovering.
    pub recovery_ms: u64,
    /// Wall milliseconds of the whole reopen.
    pub open_ms: u64,
    /// Page records applied.
    pub page_records: u64,
    /// Distinct pages touched.
    pub pages: u64,
}

/// Write rows without letting pages be flushed until `redo_bytes` of redo
/// lie beyond the checkpoint, crash, and time the recovery at reopen.
pub fn recovery_time(dir: &Path, mut opts: Options, redo_bytes: u64) -> Result<RecoveryTime> {
    // A log large enough to hold the redo, a pool large enough that no page
    // is evicted, and no flushing below 99 % dirty: the checkpoint stays put.
    opts.log_files_in_group = 2;
    opts.log_file_size = (redo_bytes * 3 / 4).next_multiple_of(1 << 20).max(8 << 20);
    opts.max_dirty_pages_pct = 99.0;
    opts.flush_log_at_trx_commit = 2;
    let db = Db::open(dir, opts.clone())?;
    let t = db.table_or_create("redo")?;
    let ckpt = db.metrics().get("log_lsn_last_checkpoint").unwrap_or(0);
    let mut rng = SmallRng::seed_from_u64(7);
    let v = [0xa5u8; 200];
    let mut rows = 0u64;
    while db.metrics().get("log_lsn_current").unwrap_or(0) - ckpt < redo_bytes {
        let k: u64 = rng.gen();
        t.put(&k.to_be_bytes(), &v)?;
        rows += 1;
    }
    let m = db.metrics();
    let redo =
        m.get("log_lsn_current").unwrap_or(0) - m.get("log_lsn_last_checkpoint").unwrap_or(0);
    db.flush_log()?;
    drop(t);
    db.simulate_crash();
    let t0 = Instant::now();
    let db = Db::open(dir, opts)?;
    let open_ms = t0.elapsed().as_millis() as u64;
    let m = db.metrics();
    let r = RecoveryTime {
        redo_bytes: redo,
        rows,
        recovery_ms: m.get("recovery_time_ms").unwrap_or(0),
        open_ms,
        page_records: m.get("recovery_page_records_applied").unwrap_or(0),
        pages: m.get("recovery_pages_touched").unwrap_or(0),
    };
    db.close()?;
    Ok(r)
}
