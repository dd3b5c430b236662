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

#[test]
fn large_transactions_on_a_tiny_log_make_progress() {
    // 500-row transactions on 4 threads against a 2 MiB log: each commit
    // needs a good share of the log, so the free check must flush far
    // enough for it, not just to the async mark.
    let dir = tempfile::tempdir().unwrap();
    let mut o = common::small_opts(2048);
    o.log_file_size = 1 << 20;
    let db = Db::open(dir.path(), o).unwrap();
    let tables: Vec<_> = (0..4)
        .map(|i| db.create_table(&format!("t{i}")).unwrap())
        .collect();
    std::thread::scope(|s| {
        for (w, t) in tables.iter().enumerate() {
            let db = db.clone();
            s.spawn(move || {
                for batch in 0..20u32 {
                    let mut tx = db.begin();
                    for i in 0..500u32 {
                        tx.put(t, &(batch * 500 + i).to_be_bytes(), &[w as u8; 200])
                            .unwrap();
                    }
                    tx.commit().unwrap();
                }
            });
        }
    });
    for t in &tables {
        assert_eq!(t.range(..).unwrap().count(), 10_000);
    }
    // A transaction larger than half the log is refused with a clear error.
    let mut tx = db.begin();
    for i in 0..6000u32 {
        tx.put(&tables[0], &i.to_be_bytes(), &[9u8; 250]).unwrap();
    }
    let e = tx.commit().unwrap_err();
    assert!(e.to_string().contains("log_file_size"), "{e}");
    drop(tables);
    db.close().unwrap();
}
