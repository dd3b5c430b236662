#![allow(clippy::unwrap_used)]
//! 8 threads writing and reading overlapping key ranges of one tree, then a
//! full check against a model built from each key's last writer.

mod common;

use std::collections::BTreeMap;

use keel::Db;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

#[test]
fn eight_threads_on_overlapping_ranges() {
    let seed = common::seed("eight_threads_on_overlapping_ranges");
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_opts(64)).unwrap();
    let t = db.create_table("t").unwrap();
    const KEYS: u32 = 4000;
    // Each thread owns the keys k with k % 8 == id for writing, so the final
    // state is known, but all threads read, scan and write over the same
    // key range concurrently (splits and merges in shared nodes).
    let done = std::sync::atomic::AtomicBool::new(false);
    let results: Vec<BTreeMap<u32, Option<Vec<u8>>>> = std::thread::scope(|s| {
        // The free and data gauges must stay consistent while frames move
        // between the free list and the LRU list under load.
        let (db2, done) = (db.clone(), &done);
        s.spawn(move || {
            let m = db2.metrics();
            let total = m.get("buffer_pool_pages_total").unwrap();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let free = m.get("buffer_pool_pages_free").unwrap();
                let data = m.get("buffer_pool_pages_data").unwrap();
                assert!(
                    free <= total && data <= total,
                    "gauges out of range: free {free} data {data} total {total}"
                );
                std::thread::yield_now();
            }
        });
        let hs: Vec<_> = (0..8u32)
            .map(|id| {
                let t = t.clone();
                s.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(seed ^ id as u64);
                    let mut mine = BTreeMap::new();
                    for i in 0..6000u32 {
                        let k = (rng.gen_range(0..KEYS) & !7) | id;
                        let key = k.to_be_bytes();
                        match rng.gen_range(0..10) {
                            0..=5 => {
                                let v = vec![(i % 251) as u8; rng.gen_range(1..900)];
                                t.put(&key, &v).unwrap();
                                mine.insert(k, Some(v));
                            }
                            6 | 7 => {
                                t.delete(&key).unwrap();
                                mine.insert(k, None);
                            }
                            8 => {
                                let got = t.get(&key).unwrap();
                                if let Some(want) = mine.get(&k) {
                                    assert_eq!(&got, want, "thread {id} key {k}");
                                }
                            }
                            _ => {
                                let lo = rng.gen_range(0..KEYS).to_be_bytes();
                                let mut prev: Option<Vec<u8>> = None;
                                for r in t.range(&lo[..]..).unwrap().take(50) {
                                    let (k, _) = r.unwrap();
                                    assert!(
                                        prev.as_ref().is_none_or(|p| *p < k),
                                        "scan out of order"
                                    );
                                    prev = Some(k);
                                }
                            }
                        }
                    }
                    mine
                })
            })
            .collect();
        let r = hs.into_iter().map(|h| h.join().unwrap()).collect();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        r
    });
    let mut model = BTreeMap::new();
    for m in results {
        for (k, v) in m {
            if let Some(v) = v {
                model.insert(k.to_be_bytes().to_vec(), v);
            }
        }
    }
    let all: Vec<_> = t.range(..).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(all.len(), model.len());
    assert!(all.into_iter().eq(model.into_iter()));
    t.check().unwrap();
    drop(t);
    db.close().unwrap();
}

#[test]
fn flush_returns_while_writers_keep_writing() {
    // Db::flush writes what was dirty when it began; pages writers dirty
    // meanwhile are not waited for, so it ends however busy the database is.
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_opts(256)).unwrap();
    let t = db.create_table("t").unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for w in 0..4u32 {
            let (t, stop) = (&t, &stop);
            s.spawn(move || {
                let mut i = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    t.put(
                        &(i.wrapping_mul(2_654_435_761) ^ w).to_be_bytes(),
                        &[w as u8; 100],
                    )
                    .unwrap();
                    i += 1;
                }
            });
        }
        for _ in 0..5 {
            std::thread::sleep(std::time::Duration::from_millis(50));
            let started = std::time::Instant::now();
            db.flush().unwrap();
            assert!(started.elapsed() < std::time::Duration::from_secs(20));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    t.check().unwrap();
}
