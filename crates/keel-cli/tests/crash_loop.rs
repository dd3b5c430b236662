#![allow(clippy::unwrap_used)]
//! The crash loop with real processes: `keel crashtest` kills a child that
//! runs bank transfers (flush_log_at_trx_commit = 1) with SIGKILL, 20 times,
//! and after each recovery checks the total balance and that every
//! acknowledged transfer is present; meanwhile two reader threads of the
//! child sum every balance in one snapshot (a REPEATABLE-READ transaction,
//! and plain `Table::range` calls) and any wrong total fails the cycle. A
//! 64-page pool (smaller than the
//! tables after a few cycles), eager page cleaning and a 2 MiB log make
//! page eviction, doublewrite batches cut by the kill, checkpoints during
//! the child's run and log wrap-around happen within the 20 cycles; four
//! instances with four page cleaners flush in parallel, neighbor areas
//! included.

mod common;

use common::{keel_cmd, run};

#[test]
fn sigkilled_bank_transfers_keep_total_and_every_acknowledged_commit() {
    let dir = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let out = run(keel_cmd()
        .args(["crashtest", "--cycles", "20", "--threads", "4"])
        .args(["--accounts", "64", "--seed", "20240917"])
        .arg("--dir")
        .arg(dir.path())
        .args(["--set", "page_size=4096"])
        .args(["--set", "buffer_pool_size=256KiB"])
        .args(["--set", "log_file_size=1MiB"])
        .args(["--set", "max_dirty_pages_pct=10"])
        // Four instances, each with its own page cleaner flushing in
        // parallel with the others and with the writers.
        .args(["--set", "buffer_pool_instances=4"])
        .args(["--set", "page_cleaners=4"])
        // Batches that also write whole neighbor areas.
        .args(["--set", "flush_neighbors=2"]));
    let text = out.text();
    if !out.ok() {
        // Keep the database and the crash image for the post-mortem.
        let kept = dir.keep();
        panic!(
            "crashtest failed (files kept in {}):\n{text}",
            kept.display()
        );
    }
    assert!(text.contains("crashtest passed: 20 cycles"), "{text}");
    let reads: u64 = text
        .split(" snapshot reads right")
        .next()
        .and_then(|t| t.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(reads > 0, "the readers checked no snapshot: {text}");
    assert_eq!(text.matches("\ncycle ").count(), 20, "{text}");
    eprintln!("{text}crash loop took {:?}", started.elapsed());
}
