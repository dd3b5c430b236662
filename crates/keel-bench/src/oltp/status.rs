//! The engine status report, in the spirit of InnoDB's
//! `SHOW ENGINE INNODB STATUS`: log positions, checkpoint age against its
//! marks, the buffer pool, flushing by kind, transactions.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use keel::Db;

use super::options_json;

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / f64::from(1u32 << 20))
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

fn section(out: &mut String, title: &str) {
    let rule = "-".repeat(title.len());
    let _ = write!(out, "{rule}\n{title}\n{rule}\n");
}

/// The status of `db` now. With `since` = (metrics at an earlier instant,
/// seconds elapsed since), rates per second over that span are added.
pub fn status_report(db: &Db, since: Option<(&BTreeMap<&'static str, u64>, f64)>) -> String {
    let m = db.metrics().snapshot();
    let g = |n: &str| m.get(n).copied().unwrap_or(0);
    let policy = options_json(db.options())
        .get("flush_policy")
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let mut out = format!(
        "=====================================\nKEEL ENGINE STATUS ({})\n\
         =====================================\n",
        db.dir().display()
    );
    section(&mut out, "LOG");
    let (age, cap) = (g("log_lsn_checkpoint_age"), g("log_capacity"));
    let _ = write!(
        out,
        "Log sequence number {}\nLog flushed up to   {}\nLast checkpoint at  {}\n\
         Checkpoint age      {age} bytes, {:.1}% of capacity {} (async mark {:.1}%, sync mark {:.1}%)\n\
         {} log writes, {} bytes written, {} log syncs, {} checkpoints\n",
        g("log_lsn_current"),
        g("log_lsn_last_flush"),
        g("log_lsn_last_checkpoint"),
        pct(age, cap),
        mib(cap),
        pct(g("log_max_modified_age_async"), cap),
        pct(g("log_max_modified_age_sync"), cap),
        g("log_writes"),
        g("log_bytes_written"),
        g("os_log_fsyncs"),
        g("log_checkpoints"),
    );
    section(&mut out, "BUFFER POOL AND MEMORY");
    let total = g("buffer_pool_pages_total");
    let _ = write!(
        out,
        "Buffer pool size    {total} pages\nDatabase pages      {}\nModified db pages   {} ({:.1}%)\n\
         Free buffers        {} ({:.1}%)\n\
         Pending writes: LRU 0, flush list 0, single page 0 (writes are not queued by this engine yet)\n\
         Pages read {}, created {}, written {}\n",
        g("buffer_pool_pages_data"),
        g("buffer_pool_pages_dirty"),
        pct(g("buffer_pool_pages_dirty"), total),
        g("buffer_pool_pages_free"),
        pct(g("buffer_pool_pages_free"), total),
        g("buffer_pool_reads"),
        g("space_pages_allocated"),
        g("buffer_pages_written"),
    );
    if let Some((a, secs)) = since {
        let rate =
            |n: &str| (g(n).saturating_sub(a.get(n).copied().unwrap_or(0))) as f64 / secs.max(1e-9);
        let _ = writeln!(
            out,
            "{:.2} reads/s, {:.2} creates/s, {:.2} writes/s (over the last {secs:.1} s)",
            rate("buffer_pool_reads"),
            rate("space_pages_allocated"),
            rate("buffer_pages_written"),
        );
    }
    let requests = g("buffer_pool_read_requests");
    let _ = writeln!(
        out,
        "Buffer pool hit rate {:.1}% of {requests} page requests",
        100.0 - pct(g("buffer_pool_reads"), requests)
    );
    section(&mut out, "FLUSHING");
    let _ = write!(
        out,
        "Flush policy        {policy}\n\
         Pages flushed: flush list {}, LRU {}, sync {}, single page {}, neighbors {}\n\
         Sync flush waits    {} ({:.1} ms in total, longest {:.1} ms)\n\
         Throttle delay      {:.1} ms in total\n\
         Cleaner rounds {}, batches {}; doublewrite batches {}, pages {}; data file syncs {}\n",
        g("buffer_flush_background_total_pages"),
        g("buffer_LRU_batch_flush_total_pages"),
        g("buffer_flush_sync_total_pages"),
        g("buffer_LRU_single_flush_total_pages"),
        g("buffer_flush_neighbor_total_pages"),
        g("buffer_flush_sync_waits"),
        g("buffer_flush_sync_wait_us_total") as f64 / 1000.0,
        g("buffer_flush_sync_wait_us_max") as f64 / 1000.0,
        g("buffer_flush_throttle_delay_us_total") as f64 / 1000.0,
        g("buffer_flush_cleaner_rounds"),
        g("buffer_flush_batches"),
        g("dblwr_writes"),
        g("dblwr_pages_written"),
        g("os_data_fsyncs"),
    );
    section(&mut out, "TRANSACTIONS");
    let _ = writeln!(
        out,
        "{} commits, {} rollbacks, {} row lock waits ({} ms), {} deadlocks, {} lock wait timeouts",
        g("trx_commits"),
        g("trx_rollbacks"),
        g("lock_row_lock_waits"),
        g("lock_row_lock_time_ms"),
        g("lock_deadlocks"),
        g("lock_timeouts"),
    );
    out.push_str("----------------------------\nEND OF KEEL ENGINE STATUS\n");
    out
}
