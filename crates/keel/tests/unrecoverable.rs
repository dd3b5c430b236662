#![allow(clippy::unwrap_used)]
//! Situations recovery cannot repair are clear errors, never wrong data.

mod common;

use std::sync::Arc;

use keel::io::faulty::FaultyFs;
use keel::{Db, Error};

#[test]
fn redo_log_of_another_database_is_refused() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    for d in [&a, &b] {
        let db = Db::open(d.path(), common::small_opts(64)).unwrap();
        db.create_table("t").unwrap();
        db.close().unwrap();
    }
    std::fs::copy(b.path().join("redo-0.keel"), a.path().join("redo-0.keel")).unwrap();
    let msg = Db::open(a.path(), common::small_opts(64))
        .err()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("redo-0.keel") && msg.contains("another database"),
        "{msg}"
    );
}

#[test]
fn missing_redo_log_is_refused() {
    let a = tempfile::tempdir().unwrap();
    let db = Db::open(a.path(), common::small_opts(64)).unwrap();
    db.close().unwrap();
    for i in 0..2 {
        std::fs::remove_file(a.path().join(format!("redo-{i}.keel"))).unwrap();
    }
    let msg = Db::open(a.path(), common::small_opts(64))
        .err()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("redo-0.keel") && msg.contains("missing"),
        "{msg}"
    );
}

#[test]
fn torn_page_without_doublewrite_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    let mut o = common::bank::opts();
    o.doublewrite = keel::DoublewriteMode::Off;
    let db = Db::open_with_fs(dir.path(), o.clone(), Some(fs.clone())).unwrap();
    let t = db.create_table("t").unwrap();
    for i in 0..50u32 {
        t.put(&i.to_be_bytes(), &[1u8; 100]).unwrap();
    }
    db.flush().unwrap();
    // Changes to the table's root page (page 2) that only the log holds.
    for i in 0..50u32 {
        t.put(&i.to_be_bytes(), &[2u8; 100]).unwrap();
    }
    drop(t);
    db.simulate_crash();
    // Page 2 lives in file 0 at offset 3 × 16 KiB; tear its second 4 KiB.
    fs.write_durable(
        &dir.path().join("data-0.keel"),
        3 * 16384 + 4096,
        &[0xEE; 4096],
    )
    .unwrap();
    let err = Db::open_with_fs(dir.path(), o, Some(fs))
        .err()
        .expect("recovery must refuse a torn page it cannot repair");
    assert!(matches!(err, Error::CorruptPage { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("0:2") && msg.contains("doublewrite"), "{msg}");
}
