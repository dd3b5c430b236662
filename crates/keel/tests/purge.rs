#![allow(clippy::unwrap_used)]
//! Purge: the race between removing a delete mark and a commit that writes
//! the row again, and purge resuming after a crash.

mod common;

use std::time::{Duration, Instant};

use keel::{Db, Isolation, Options};

fn opts() -> Options {
    Options {
        purge_threads: 1,
        ..common::small_opts(256)
    }
}

#[test]
fn a_row_written_again_while_purge_removes_its_delete_mark_keeps_its_new_version() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = db.create_table("t").unwrap();
    t.put(b"k", b"old").unwrap();
    t.put(b"other", b"x").unwrap();
    common::drained(&db, Duration::from_secs(10));
    // Purge stops after choosing the delete mark of `k`, before its leaf.
    let hold = db.failpoint("purge.del_mark");
    assert!(t.delete(b"k").unwrap());
    assert!(
        hold.wait_held(Duration::from_secs(10)),
        "purge never got to the mark"
    );
    // Meanwhile the row is written again: a new version over the mark.
    assert!(!t.put(b"k", b"new").unwrap());
    hold.release();
    common::drained(&db, Duration::from_secs(10));
    assert_eq!(t.get(b"k").unwrap().as_deref(), Some(&b"new"[..]));
    db.check().unwrap();
    assert_eq!(db.metrics().snapshot()["purge_del_mark_records"], 0);
    // A mark nobody wrote over is removed.
    assert!(t.delete(b"other").unwrap());
    common::drained(&db, Duration::from_secs(10));
    let t0 = Instant::now();
    while db.metrics().snapshot()["purge_del_mark_records"] == 0 {
        assert!(t0.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(t.get(b"other").unwrap(), None);
    db.close().unwrap();
}

#[test]
fn purge_resumes_after_a_crash_and_empties_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = db.create_table("t").unwrap();
    for i in 0..100u32 {
        t.put(&i.to_be_bytes(), b"v0").unwrap();
    }
    // A view held open keeps the history of 2,000 updates and deletes.
    let reader = db.begin_with(Isolation::RepeatableRead);
    assert_eq!(
        reader.get(&t, &7u32.to_be_bytes()).unwrap().as_deref(),
        Some(&b"v0"[..])
    );
    for round in 1..=20u32 {
        for i in 0..100u32 {
            if i % 10 == 0 && round == 20 {
                t.delete(&i.to_be_bytes()).unwrap();
            } else {
                t.put(&i.to_be_bytes(), format!("v{round}").as_bytes())
                    .unwrap();
            }
        }
    }
    let before = db.history();
    assert!(before.history_len >= 2000, "{before:?}");
    assert_eq!(
        reader.get(&t, &7u32.to_be_bytes()).unwrap().as_deref(),
        Some(&b"v0"[..])
    );
    db.flush().unwrap();
    db.check().unwrap();
    // The 10 deleted rows are still in the tree as delete marks.
    let s = t.check().unwrap();
    assert_eq!((s.entries, s.delete_marked), (100, 10), "{s:?}");
    drop(reader);
    db.simulate_crash();

    // No view survives; purge starts with the open and empties the history.
    let db = Db::open(dir.path(), opts()).unwrap();
    let took = common::drained(&db, Duration::from_secs(30));
    let after = db.history();
    assert_eq!(after.views_open, 0);
    assert!(after.purged_records >= 2000, "{after:?}");
    let t = db.table("t").unwrap();
    for i in 0..100u32 {
        let want = (i % 10 != 0).then(|| b"v20".to_vec());
        assert_eq!(t.get(&i.to_be_bytes()).unwrap(), want, "row {i}");
    }
    // The delete marks went too.
    let t0 = Instant::now();
    while db.metrics().snapshot()["purge_del_mark_records"] < 10 {
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", db.history());
        std::thread::sleep(Duration::from_millis(10));
    }
    db.check().unwrap();
    let s = t.check().unwrap();
    assert_eq!((s.entries, s.delete_marked), (90, 0), "{s:?}");
    eprintln!(
        "history of {} purged {took:?} after the reopen",
        before.history_len
    );
    db.close().unwrap();
}
