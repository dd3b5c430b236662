#![allow(clippy::unwrap_used)]
//! Corrupted pages, foreign files and mismatched files give clear errors.

mod common;

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};

use keel::{Db, Error};

fn make_db(dir: &std::path::Path, page_size: usize) {
    let mut o = common::small_opts(64);
    o.page_size = page_size;
    o.buffer_pool_size = 64 * page_size as u64;
    let db = Db::open(dir, o).unwrap();
    let t = db.create_table("t").unwrap();
    for i in 0..2000u32 {
        t.put(&i.to_be_bytes(), &[7u8; 100]).unwrap();
    }
    drop(t);
    db.close().unwrap();
}

#[test]
fn flipped_byte_in_a_page_is_a_checksum_error_naming_page_and_file() {
    let dir = tempfile::tempdir().unwrap();
    make_db(dir.path(), 4096);
    // No doublewrite copies may exist for this test.
    for i in 0..2 {
        let _ = std::fs::remove_file(dir.path().join(format!("dblwr-{i}.keel")));
    }
    // Page 3 is in file 0 (extent 0) at offset 4 × 4096; flip a byte in its body.
    let path = dir.path().join("data-0.keel");
    let mut f = OpenOptions::new()
        .write(true)
        .read(true)
        .open(&path)
        .unwrap();
    f.seek(SeekFrom::Start(4 * 4096 + 1000)).unwrap();
    f.write_all(&[0xAB]).unwrap();
    drop(f);
    // With doublewrite on, a bad page that has a copy in the doublewrite
    // area is repaired at open (a corrupt page looks like a torn one); the
    // check must see the damage, so open without it.
    let mut o = common::small_opts(64);
    o.doublewrite = keel::DoublewriteMode::Off;
    let db = Db::open(dir.path(), o).unwrap();
    let err = db.check().unwrap_err();
    match &err {
        Error::CorruptPage {
            page,
            path: p,
            reason,
        } => {
            assert_eq!(page.page_no, 3);
            assert!(p.ends_with("data-0.keel"));
            assert!(reason.contains("checksum"), "{reason}");
        }
        other => panic!("expected CorruptPage, got {other}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("0:3") && msg.contains("data-0.keel"), "{msg}");
}

#[test]
fn foreign_file_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    make_db(dir.path(), 4096);
    let path = dir.path().join("data-1.keel");
    let junk = vec![0x5Au8; 3 * 4096];
    std::fs::write(&path, &junk).unwrap();
    let err = Db::open(dir.path(), common::small_opts(64)).err().unwrap();
    let msg = err.to_string();
    assert!(
        msg.contains("data-1.keel") && msg.contains("magic"),
        "{msg}"
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        junk,
        "the foreign file must not be written"
    );
}

#[test]
fn file_of_another_database_is_refused() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    make_db(a.path(), 4096);
    make_db(b.path(), 4096);
    std::fs::copy(b.path().join("data-1.keel"), a.path().join("data-1.keel")).unwrap();
    let msg = Db::open(a.path(), common::small_opts(64))
        .err()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("data-1.keel") && msg.contains("another database"),
        "{msg}"
    );
}

#[test]
fn other_page_size_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    make_db(dir.path(), 8192);
    let msg = Db::open(dir.path(), common::small_opts(64))
        .err()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("data-0.keel") && msg.contains("page size 8192"),
        "{msg}"
    );
}

#[test]
fn truncated_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    make_db(dir.path(), 4096);
    let path = dir.path().join("data-0.keel");
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    let len = f.metadata().unwrap().len();
    f.set_len(len - 1000).unwrap();
    drop(f);
    let msg = Db::open(dir.path(), common::small_opts(64))
        .err()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("data-0.keel") && msg.contains("truncated"),
        "{msg}"
    );
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(100).unwrap();
    drop(f);
    let msg = Db::open(dir.path(), common::small_opts(64))
        .err()
        .unwrap()
        .to_string();
    assert!(msg.contains("truncated"), "{msg}");
}

#[test]
fn bad_options_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = common::small_opts(64);
    o.page_size = 5000;
    let msg = Db::open(dir.path(), o).err().unwrap().to_string();
    assert!(msg.contains("page_size"), "{msg}");
    let mut o = common::small_opts(64);
    o.buffer_pool_size = 4096;
    let msg = Db::open(dir.path(), o).err().unwrap().to_string();
    assert!(msg.contains("buffer_pool_size"), "{msg}");
}

#[test]
fn oversized_keys_and_values_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_opts(64)).unwrap();
    let t = db.create_table("t").unwrap();
    // One byte past the longest key of 4 KiB pages (768 bytes).
    let max = common::max_key_len(4096);
    assert!(matches!(
        t.put(&vec![1u8; max + 1], b"v"),
        Err(Error::KeyTooLarge { len, max: m }) if len == max + 1 && m == max
    ));
    assert!(!t.put(&vec![1u8; max], b"v").unwrap());
    // Past a quarter page a value goes to overflow pages; past 1 GiB it is
    // refused (the vector is never touched: the size is checked first).
    t.put(b"k", &[1u8; 1025]).unwrap();
    assert!(matches!(
        t.put(b"k", &vec![0u8; (1 << 30) + 1]),
        Err(Error::ValueTooLarge { max, .. }) if max == 1 << 30
    ));
    assert!(matches!(db.create_table("t"), Err(Error::TableExists(_))));
    assert!(matches!(db.table("nope"), Err(Error::TableNotFound(_))));
    drop(t);
    db.close().unwrap();
}

/// A log header with a valid checksum but a file size no log can have (at
/// most the reserved header blocks) once made opening underflow and divide
/// by zero; it is a clear error now, naming the file.
#[test]
fn checksum_valid_log_header_with_impossible_size_is_refused() {
    use keel::format::redo::{LogFileHeader, LOG_HEADER_LEN};
    let dir = tempfile::tempdir().unwrap();
    make_db(dir.path(), 4096);
    let path = dir.path().join("redo-0.keel");
    let mut b = std::fs::read(&path).unwrap();
    let mut h = LogFileHeader::decode(&b).unwrap();
    h.file_size = 4096;
    h.encode(&mut b[..LOG_HEADER_LEN]);
    std::fs::write(&path, &b).unwrap();
    let err = Db::open(dir.path(), common::small_opts(64)).err().unwrap();
    let msg = err.to_string();
    assert!(
        msg.contains("redo-0.keel") && msg.contains("log file size 4096"),
        "{msg}"
    );
}

#[test]
fn a_missing_redo_log_file_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    make_db(dir.path(), 4096);
    std::fs::remove_file(dir.path().join("redo-1.keel")).unwrap();
    let err = Db::open(dir.path(), common::small_opts(64)).err().unwrap();
    let msg = err.to_string();
    assert!(
        msg.contains("redo-1.keel") && msg.contains("missing"),
        "{msg}"
    );
}

#[test]
fn other_log_sizes_on_an_existing_database_keep_the_log_and_say_so() {
    let dir = tempfile::tempdir().unwrap();
    make_db(dir.path(), 4096);
    let mut o = common::small_opts(64);
    o.log_file_size = 4 << 20;
    o.log_files_in_group = 3;
    let db = Db::open(dir.path(), o).unwrap();
    // The log was created with 2 files of 1 MiB: the options in effect say
    // what the log is, not what was asked.
    let in_effect = db.options();
    assert_eq!(
        (in_effect.log_file_size, in_effect.log_files_in_group),
        (1 << 20, 2)
    );
    assert!(db.metrics().snapshot()["log_capacity"] < 2 << 20);
    let t = db.table("t").unwrap();
    assert_eq!(t.get(&7u32.to_be_bytes()).unwrap(), Some(vec![7u8; 100]));
    drop(t);
    db.close().unwrap();
}
