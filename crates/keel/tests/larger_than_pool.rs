#![allow(clippy::unwrap_used)]
//! A data set at least 10× the buffer pool: load, read everything back
//! (point gets and a full scan), reopen, read again.

mod common;

use keel::Db;

fn value(i: u32) -> Vec<u8> {
    (0..200)
        .map(|j| (i.wrapping_mul(7) as usize + j) as u8)
        .collect()
}

#[test]
fn data_set_ten_times_the_pool() {
    let dir = tempfile::tempdir().unwrap();
    let opts = common::small_opts(64); // 256 KiB of pool
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    let t = db.create_table("big").unwrap();
    let n = 20_000u32; // ~4.4 MB of rows, > 10 × 256 KiB
    let mut order: Vec<u32> = (0..n).collect();
    // A fixed permutation (random-looking insert order).
    order.sort_by_key(|i| i.wrapping_mul(2_654_435_761));
    for &i in &order {
        t.put(&i.to_be_bytes(), &value(i)).unwrap();
    }
    let written = db.metrics().get("buffer_pages_written").unwrap();
    let stats = t.check().unwrap();
    let pool_pages = db.metrics().get("buffer_pool_pages_total").unwrap();
    assert!(
        (stats.leaf_pages + stats.internal_pages) as u64 >= 10 * pool_pages,
        "tree of {} pages is not 10x the pool's {pool_pages}",
        stats.leaf_pages + stats.internal_pages
    );
    assert!(
        written > 0,
        "pages must have been written back during the load"
    );
    for i in (0..n).step_by(7) {
        assert_eq!(t.get(&i.to_be_bytes()).unwrap(), Some(value(i)), "row {i}");
    }
    drop(t);
    db.close().unwrap();
    let db = Db::open(dir.path(), opts).unwrap();
    let t = db.table("big").unwrap();
    let mut count = 0u32;
    for r in t.range(..).unwrap() {
        let (k, v) = r.unwrap();
        assert_eq!(k, count.to_be_bytes());
        assert_eq!(v, value(count));
        count += 1;
    }
    assert_eq!(count, n);
    assert!(db.metrics().get("buffer_pool_reads").unwrap() > pool_pages);
    drop(t);
    db.close().unwrap();
}
