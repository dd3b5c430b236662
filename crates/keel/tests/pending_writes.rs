#![allow(clippy::unwrap_used)]
//! The pending-writes gauges (`buffer_pending_writes_*`, InnoDB's "Pending
//! writes: LRU, flush list, single page"): a flush-list write held inside
//! the device shows as pending of that kind, and nothing is pending once it
//! is written.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use keel::io::faulty::FaultyFs;
use keel::Db;

#[test]
fn a_held_flush_list_write_is_pending_until_it_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    let mut o = common::small_opts(2048);
    o.flush_method = Default::default();
    o.page_cleaners = 1;
    o.doublewrite = keel::DoublewriteMode::Off;
    let db = Db::open_with_fs(dir.path(), o, Some(fs.clone())).unwrap();
    let t = db.create_table("t").unwrap();
    for i in 0..2000u32 {
        t.put(&i.to_be_bytes(), &[7u8; 100]).unwrap();
    }
    let m = db.metrics_shared();
    let gauges = |m: &keel::Metrics| {
        [
            "buffer_pending_writes_lru",
            "buffer_pending_writes_flush_list",
            "buffer_pending_writes_single_page",
        ]
        .map(|n| m.get(n).unwrap())
    };
    let hold = fs.arm("/data-.write:hold", 0).unwrap();
    let flusher = {
        let db = db.clone();
        std::thread::spawn(move || db.flush())
    };
    hold.wait_held(Duration::from_secs(20)).unwrap();
    let [lru, list, single] = gauges(&m);
    assert!(list > 0, "a held flush-list write is not pending");
    assert_eq!((lru, single), (0, 0));
    hold.release();
    flusher.join().unwrap().unwrap();
    // A page cleaner's batch may still be finishing: nothing stays pending.
    let deadline = Instant::now() + Duration::from_secs(10);
    while gauges(&m) != [0, 0, 0] && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(gauges(&m), [0, 0, 0]);
    drop(t);
    db.close().unwrap();
}
