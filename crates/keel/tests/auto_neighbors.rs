#![allow(clippy::unwrap_used)]
//! `flush_neighbors = auto` under `steady`, end to end (engine, cleaners,
//! policy, batches): on a device model that charges by the operation
//! (an IOPS limit and no byte limit) the policy measures a write cost far
//! over its threshold and batches write contiguous runs; with
//! `doublewrite = detect_only` (no page images to measure a long write by)
//! nothing is measured and pages go alone; a fixed option wins over the
//! policy's choice.
//!
//! Timing on a shared 2-core machine is noisy, so the checks lean on what
//! the model guarantees whatever the CPU does: at 400 IOPS and no byte
//! limit a doublewrite copy of many pages costs one operation, like a
//! single page written in place, so the measured cost is in the hundreds
//! (the threshold is 8), and a slow CPU only makes the in-place writes
//! look dearer still.

mod common;

use std::time::{Duration, Instant};

use keel::{Db, DoublewriteMode, FlushNeighbors, NeighborMode, Options};

fn opts(doublewrite: DoublewriteMode) -> Options {
    let mut o = common::small_opts(512);
    o.device = "iops=400".into();
    o.doublewrite = doublewrite;
    o
}

fn metric(db: &Db, name: &str) -> u64 {
    db.metrics().get(name).unwrap()
}

/// Update rows spread over the table until `done` or `limit`; true if
/// `done` was met.
fn churn(db: &Db, limit: Duration, done: impl Fn(&Db) -> bool) -> bool {
    let t = db.table_or_create("t").unwrap();
    let start = Instant::now();
    let mut k: u32 = 0;
    while start.elapsed() < limit {
        for _ in 0..50 {
            k = k.wrapping_mul(2_654_435_761).wrapping_add(12_345);
            t.put(&(k % 4000).to_be_bytes(), &[k as u8; 200]).unwrap();
        }
        if done(db) {
            return true;
        }
    }
    false
}

fn loaded(o: Options) -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), o).unwrap();
    let t = db.table_or_create("t").unwrap();
    for i in 0..4000u32 {
        t.put(&i.to_be_bytes(), &[0; 200]).unwrap();
    }
    (dir, db)
}

#[test]
fn on_a_device_limited_in_operations_steady_turns_contiguous_runs_on() {
    let (_dir, db) = loaded(opts(DoublewriteMode::On));
    assert_eq!(db.options().flush_neighbors, FlushNeighbors::Auto);
    let on = churn(&db, Duration::from_secs(60), |db| {
        metric(db, "buffer_flush_neighbors_mode") == 1
    });
    let cost = metric(&db, "steady_write_cost_pages_x1000") as f64 / 1000.0;
    assert!(
        on,
        "runs not chosen within 60 s; write cost {cost} pages, {} area writes",
        metric(&db, "dblwr_writes")
    );
    assert!(cost >= 8.0, "chosen at a write cost of {cost} pages");
    // And the batches do write neighbors now.
    let before = metric(&db, "buffer_flush_neighbor_total_pages");
    assert!(
        churn(&db, Duration::from_secs(60), |db| {
            metric(db, "buffer_flush_neighbor_total_pages") > before
        }),
        "no neighbor written in 60 s with runs chosen"
    );
    // A fixed option wins over the choice, from the next round on.
    db.set_option("flush_neighbors", "0").unwrap();
    assert!(
        churn(&db, Duration::from_secs(30), |db| {
            metric(db, "buffer_flush_neighbors_mode") == 0
        }),
        "flush_neighbors = 0 not followed"
    );
}

#[test]
fn without_page_images_nothing_is_measured_and_pages_go_alone() {
    let (_dir, db) = loaded(opts(DoublewriteMode::DetectOnly));
    // Enough writes of both kinds for several measuring windows.
    let busy = churn(&db, Duration::from_secs(60), |db| {
        metric(db, "dblwr_writes") >= 40 && metric(db, "os_data_writes") >= 400
    });
    assert!(busy, "too few writes in 60 s: the test proves nothing");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(metric(&db, "steady_write_cost_pages_x1000"), 0);
    assert_eq!(
        metric(&db, "buffer_flush_neighbors_mode"),
        u64::from(NeighborMode::Off.as_option())
    );
}
