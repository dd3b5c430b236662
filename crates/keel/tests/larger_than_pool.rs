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

/// Many threads at once on a table ten times a pool of two instances: a
/// page is evicted, loaded by two threads at the same moment, made young
/// and written back while others look it up in its page-hash shard.
/// Readers check every row they get against the key it belongs to;
/// writers rewrite rows with a version the row carries, and at the end
/// every row holds its last writer's version.
#[test]
fn many_threads_read_and_write_a_table_ten_times_the_pool() {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::sync::atomic::{AtomicBool, Ordering};

    let seed = common::seed("many_threads_read_and_write_a_table_ten_times_the_pool");
    let dir = tempfile::tempdir().unwrap();
    let mut opts = common::small_opts(128);
    opts.buffer_pool_instances = 2;
    let db = Db::open(dir.path(), opts).unwrap();
    let t = db.create_table("big").unwrap();
    const N: u32 = 20_000;
    const WRITERS: u32 = 3;
    let row = |i: u32, version: u32| {
        let mut v = value(i);
        v[..4].copy_from_slice(&version.to_be_bytes());
        v
    };
    for i in 0..N {
        t.put(&i.to_be_bytes(), &row(i, 0)).unwrap();
    }
    let stop = AtomicBool::new(false);
    let last: Vec<Vec<(u32, u32)>> = std::thread::scope(|s| {
        for r in 0..13u64 {
            let (t, stop) = (&t, &stop);
            s.spawn(move || {
                // Readers in pairs share a sequence, so that two threads
                // often miss on the same page at the same moment.
                let mut rng = SmallRng::seed_from_u64(seed ^ (r / 2));
                while !stop.load(Ordering::Relaxed) {
                    let i = rng.gen_range(0..N);
                    let v = t.get(&i.to_be_bytes()).unwrap().expect("every row exists");
                    assert_eq!(v[4..], value(i)[4..], "row {i} holds another row's value");
                }
            });
        }
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let t = &t;
                s.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(seed.wrapping_add(1000 + u64::from(w)));
                    let mut last = Vec::new();
                    for version in 1..=1500u32 {
                        // Writer w owns the rows i with i % WRITERS == w.
                        let i = rng.gen_range(0..N / WRITERS) * WRITERS + w;
                        t.put(&i.to_be_bytes(), &row(i, version)).unwrap();
                        last.push((i, version));
                    }
                    last
                })
            })
            .collect();
        let last = writers.into_iter().map(|h| h.join().unwrap()).collect();
        stop.store(true, Ordering::Relaxed);
        last
    });
    let mut want = std::collections::HashMap::new();
    for (i, version) in last.into_iter().flatten() {
        want.insert(i, version);
    }
    for i in 0..N {
        let v = t.get(&i.to_be_bytes()).unwrap().unwrap();
        let version = want.get(&i).copied().unwrap_or(0);
        assert_eq!(v, row(i, version), "row {i}");
    }
    assert!(db.metrics().get("buffer_pool_reads").unwrap() > 1000);
    let stats = t.check().unwrap();
    let pool_pages = db.metrics().get("buffer_pool_pages_total").unwrap();
    assert!((stats.leaf_pages + stats.internal_pages) as u64 >= 10 * pool_pages);
    drop(t);
    db.close().unwrap();
}
