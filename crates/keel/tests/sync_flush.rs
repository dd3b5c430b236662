#![allow(clippy::unwrap_used)]
//! A redo log much smaller than the dirty data: writers reach the free-check
//! limit and wait while the oldest pages are flushed (InnoDB's "sync
//! flush"), counted in the metrics; the checkpoint age never exceeds the
//! log's capacity and nothing is lost.

mod common;

use keel::Db;

#[test]
fn small_log_forces_sync_flush_waits_that_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = common::small_opts(4096); // 16 MiB of pool
    o.log_file_size = 1 << 20; // 2 MiB of log, far less than the dirty data
    o.max_dirty_pages_pct = 99.0;
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let t = db.create_table("t").unwrap();
    let v = vec![7u8; 300];
    for i in 0..40_000u32 {
        t.put(&(i.wrapping_mul(2_654_435_761)).to_be_bytes(), &v)
            .unwrap();
    }
    let m = db.metrics();
    let waits = m.get("buffer_flush_sync_waits").unwrap();
    let pages = m.get("buffer_flush_sync_total_pages").unwrap();
    let cap = m.get("log_capacity").unwrap();
    eprintln!(
        "sync flush waits {waits}, pages {pages}, wait total {} us, max {} us, checkpoints {}",
        m.get("buffer_flush_sync_wait_us_total").unwrap(),
        m.get("buffer_flush_sync_wait_us_max").unwrap(),
        m.get("log_checkpoints").unwrap()
    );
    assert!(waits > 0, "writers must have hit the free-check limit");
    assert!(pages > 0, "sync flushing must have written pages");
    assert!(m.get("log_lsn_checkpoint_age").unwrap() <= cap);
    assert!(
        m.get("log_max_modified_age_async").unwrap() < m.get("log_max_modified_age_sync").unwrap()
    );
    drop(t);
    db.simulate_crash();
    let db = Db::open(dir.path(), o).unwrap();
    let t = db.table("t").unwrap();
    assert_eq!(t.range(..).unwrap().count(), 40_000);
    t.check().unwrap();
    drop(t);
    db.close().unwrap();
}
