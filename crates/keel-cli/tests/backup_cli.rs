//! `keel backup SRC DEST [--verify]`: a closed database copied through a
//! read-only open; a database open elsewhere, a destination that is not
//! empty and a directory without a database are refused with messages that
//! say what to do.

mod common;

use common::{keel_cmd, run};
use keel::{Db, Options};

fn opts() -> Options {
    Options {
        page_size: 4096,
        buffer_pool_size: 1 << 20,
        log_file_size: 1 << 20,
        ..Options::default()
    }
}

#[test]
fn a_closed_database_is_copied_and_the_copy_verifies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("db");
    let db = Db::open(&src, opts()).expect("open");
    let t = db.create_table("t").expect("table");
    for i in 0..2000u32 {
        t.put(&i.to_be_bytes(), b"value").expect("put");
    }
    drop(t);

    // Open here: refused, pointing to Db::backup.
    let (ok, text) = run(keel_cmd()
        .arg("backup")
        .arg(&src)
        .arg(dir.path().join("c0")))
    .ok_and_text();
    assert!(!ok, "{text}");
    assert!(
        text.contains("is open in process") && text.contains("Db::backup"),
        "{text}"
    );
    db.close().expect("close");

    let copy = dir.path().join("copy");
    let (ok, text) = run(keel_cmd()
        .arg("backup")
        .arg(&src)
        .arg(&copy)
        .arg("--verify"))
    .ok_and_text();
    assert!(ok, "{text}");
    assert!(
        text.contains("backup in") && text.contains("verified: the copy opens"),
        "{text}"
    );
    let c = Db::open(&copy, opts()).expect("open the copy");
    assert_eq!(
        c.table("t").expect("t").range(..).expect("range").count(),
        2000
    );
    drop(c);

    let (ok, text) = run(keel_cmd().arg("backup").arg(&src).arg(&copy)).ok_and_text();
    assert!(!ok && text.contains("is not empty"), "{text}");
    let (ok, text) = run(keel_cmd()
        .arg("backup")
        .arg(dir.path().join("none"))
        .arg(dir.path().join("c2")))
    .ok_and_text();
    assert!(
        !ok && text.contains("cannot read the file header"),
        "{text}"
    );
}
