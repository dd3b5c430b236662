#![allow(clippy::unwrap_used)]
//! Read-only open (`Options::read_only`, InnoDB's `innodb_read_only`):
//!
//! - every read works (get, range, a transaction's snapshot), every call
//!   that would write fails with `Error::ReadOnly`, and not one byte of
//!   any file changes, the close included;
//! - several read-only opens share a database; a writer and a reader
//!   exclude each other (`Error::Locked`);
//! - a database whose last run crashed (redo after the checkpoint) is
//!   refused, and opens read-only once a read-write open recovered it;
//! - a directory without a database is refused and left uncreated.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use keel::{Db, Error, Options};

fn opts() -> Options {
    common::small_opts(256)
}

/// Every file of the directory but the lock file, with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name() != keel::io::LOCK_FILE)
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

fn fill(dir: &Path, n: u32) {
    let db = Db::open(dir, opts()).unwrap();
    let t = db.create_table("t").unwrap();
    for i in 0..n {
        t.put(format!("k{i:05}").as_bytes(), format!("v{i}").as_bytes())
            .unwrap();
    }
    // A deleted row leaves history (a delete mark, undo) for purge: the
    // read-only open must neither purge it nor trip over it.
    t.delete(b"k00000").unwrap();
    db.close().unwrap();
}

fn is_read_only(e: &Error) -> bool {
    matches!(e, Error::ReadOnly(_))
}

#[test]
fn reads_work_writes_are_refused_and_no_byte_changes() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 2_000);
    let before = files(dir.path());

    let db = Db::open_read_only(dir.path(), opts()).unwrap();
    assert!(db.is_read_only());
    let t = db.table("t").unwrap();
    assert_eq!(t.get(b"k00001").unwrap().unwrap(), b"v1");
    assert_eq!(t.get(b"k00000").unwrap(), None);
    assert_eq!(t.range(..).unwrap().count(), 1_999);
    let mut tx = db.begin();
    assert_eq!(tx.get(&t, b"k01999").unwrap().unwrap(), b"v1999");
    assert_eq!(tx.scan(&t, ..).unwrap().count(), 1_999);

    let refused = [
        ("Txn::put", tx.put(&t, b"k1", b"x").err()),
        ("Txn::delete", tx.delete(&t, b"k00001").err()),
        ("Table::put", t.put(b"k1", b"x").err()),
        ("Table::delete", t.delete(b"k00001").err()),
        ("create_table", db.create_table("u").err()),
        ("table_or_create", db.table_or_create("u").err()),
        (
            "bulk_load",
            db.table("t")
                .unwrap()
                .bulk_load([(b"z".as_slice(), b"z".as_slice())])
                .err(),
        ),
        ("checkpoint", db.checkpoint().err()),
    ];
    for (what, e) in refused {
        let e = e.unwrap_or_else(|| panic!("{what} was not refused"));
        assert!(is_read_only(&e), "{what}: {e}");
        let text = e.to_string();
        assert!(
            text.contains("read-only") && text.contains("read_only"),
            "{text}"
        );
    }
    // The transaction is still usable for reads, and ends cleanly.
    assert_eq!(tx.get(&t, b"k00002").unwrap().unwrap(), b"v2");
    tx.commit().unwrap();
    db.flush().unwrap();
    db.close().unwrap();

    assert_eq!(files(dir.path()), before, "a read-only open changed a file");
    // And a read-write open after it finds everything as it was.
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(db.table("t").unwrap().range(..).unwrap().count(), 1_999);
    db.close().unwrap();
}

#[test]
fn read_only_opens_share_and_exclude_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 10);
    let a = Db::open_read_only(dir.path(), opts()).unwrap();
    let b = Db::open_read_only(dir.path(), opts()).unwrap();
    assert_eq!(
        a.table("t").unwrap().get(b"k00003").unwrap().unwrap(),
        b"v3"
    );
    assert_eq!(
        b.table("t").unwrap().get(b"k00004").unwrap().unwrap(),
        b"v4"
    );
    match Db::open(dir.path(), opts()) {
        Err(Error::Locked { .. }) => {}
        other => panic!("a writer beside readers: {:?}", other.err()),
    }
    drop(a);
    assert!(matches!(
        Db::open(dir.path(), opts()),
        Err(Error::Locked { .. })
    ));
    b.close().unwrap();

    let w = Db::open(dir.path(), opts()).unwrap();
    match Db::open_read_only(dir.path(), opts()) {
        Err(e @ Error::Locked { .. }) => {
            assert!(e.to_string().contains("this process"), "{e}")
        }
        other => panic!("a reader beside a writer: {:?}", other.err()),
    }
    w.close().unwrap();
    Db::open_read_only(dir.path(), opts())
        .unwrap()
        .close()
        .unwrap();
}

#[test]
fn a_crashed_database_is_refused_until_a_read_write_open_recovers_it() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 10);
    let db = Db::open(dir.path(), opts()).unwrap();
    db.table("t").unwrap().put(b"after", b"crash").unwrap();
    db.simulate_crash();
    let before = files(dir.path());

    let e = Db::open_read_only(dir.path(), opts()).err().unwrap();
    assert!(is_read_only(&e), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("did not close cleanly") && text.contains("without read_only"),
        "{text}"
    );
    assert_eq!(files(dir.path()), before, "the refused open wrote");

    Db::open(dir.path(), opts()).unwrap().close().unwrap();
    let db = Db::open_read_only(dir.path(), opts()).unwrap();
    assert_eq!(
        db.table("t").unwrap().get(b"after").unwrap().unwrap(),
        b"crash"
    );
}

#[test]
fn no_database_is_created_by_a_read_only_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("none");
    let e = Db::open_read_only(&path, opts()).err().unwrap();
    assert!(is_read_only(&e), "{e}");
    assert!(e.to_string().contains("does not create"), "{e}");
    assert!(!path.exists());
    // An empty directory is no database either, and stays empty.
    let e = Db::open_read_only(dir.path(), opts()).err().unwrap();
    assert!(is_read_only(&e), "{e}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn the_option_reads_from_toml_and_set() {
    let mut o = Options::from_toml_str("read_only = true").unwrap();
    assert!(o.read_only);
    o.set("read_only", "false").unwrap();
    assert!(!o.read_only);
}
