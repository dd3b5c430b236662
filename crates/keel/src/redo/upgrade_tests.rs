//! A log of format version 1 (before the compact framing) is opened when
//! it has nothing to recover, its headers rewritten as the current version
//! (left as they are by a read-only open), and refused, saying what to do,
//! when it has (`Log::upgrade_v1`).

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::format::{
    self, kind, Checkpoint, LogFileHeader, CHECKPOINT_SLOTS, LOG_FILE_HDR, LOG_VERSION,
    LOG_VERSION_V1,
};
use super::log_file_name;
use crate::error::Error;
use crate::Db;

use super::recovery::trust_tests::opts;

/// The log file size of [`opts`].
const FILE: u64 = 1 << 20;

fn key(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}

/// A database closed cleanly, holding rows 0..100 in table `t`.
fn closed_db(dir: &Path) {
    let db = Db::open(dir, opts()).unwrap();
    let t = db.create_table("t").unwrap();
    for i in 0..100 {
        t.put(&key(i), b"before").unwrap();
    }
}

fn read_block(dir: &Path, i: usize) -> Vec<u8> {
    let f = std::fs::File::open(dir.join(log_file_name(i))).unwrap();
    let mut b = vec![0u8; LOG_FILE_HDR as usize];
    f.read_exact_at(&mut b, 0).unwrap();
    b
}

/// The format version of each log file's header.
fn versions(dir: &Path) -> Vec<u32> {
    (0..2)
        .map(|i| LogFileHeader::decode(&read_block(dir, i)).unwrap().version)
        .collect()
}

/// Rewrite log file `i`'s header with `version`, its slots kept.
fn set_version(dir: &Path, i: usize, version: u32) {
    let mut b = read_block(dir, i);
    let mut h = LogFileHeader::decode(&b).unwrap();
    h.version = version;
    h.encode(&mut b);
    let f = OpenOptions::new()
        .write(true)
        .open(dir.join(log_file_name(i)))
        .unwrap();
    f.write_all_at(&b[..4096], 0).unwrap();
}

fn newest_checkpoint(dir: &Path) -> Checkpoint {
    let b = read_block(dir, 0);
    CHECKPOINT_SLOTS
        .iter()
        .filter_map(|&o| Checkpoint::decode(&b[o as usize..]))
        .max_by_key(|c| c.no)
        .unwrap()
}

/// Write `bytes` into the log at `lsn` (2 files of `FILE` bytes).
fn write_log(dir: &Path, lsn: u64, bytes: &[u8]) {
    assert_eq!((opts().log_file_size, opts().log_files_in_group), (FILE, 2));
    let area = FILE - LOG_FILE_HDR;
    let pos = lsn % (2 * area);
    let (file, off) = ((pos / area) as usize, pos % area);
    assert!(
        off + bytes.len() as u64 <= area,
        "the test's group crosses files"
    );
    let f = OpenOptions::new()
        .write(true)
        .open(dir.join(log_file_name(file)))
        .unwrap();
    f.write_all_at(bytes, LOG_FILE_HDR + off).unwrap();
}

fn rows(db: &Db) -> usize {
    let t = db.table("t").unwrap();
    (0..200)
        .filter(|&i| t.get(&key(i)).unwrap().is_some())
        .count()
}

#[test]
fn a_version_1_log_with_nothing_to_recover_is_rewritten_at_the_open() {
    let dir = tempfile::tempdir().unwrap();
    closed_db(dir.path());
    assert_eq!(versions(dir.path()), [LOG_VERSION, LOG_VERSION]);
    for i in 0..2 {
        set_version(dir.path(), i, LOG_VERSION_V1);
    }
    // Read-only: opened, read, and left as it was.
    let db = Db::open_read_only(dir.path(), opts()).unwrap();
    assert_eq!(rows(&db), 100);
    drop(db);
    assert_eq!(versions(dir.path()), [LOG_VERSION_V1, LOG_VERSION_V1]);
    // Writable: the headers are rewritten, and what it then appends is
    // recovered in the current framing.
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(versions(dir.path()), [LOG_VERSION, LOG_VERSION]);
    let t = db.table("t").unwrap();
    for i in 100..150 {
        t.put(&key(i), b"after").unwrap();
    }
    drop(t);
    db.simulate_crash();
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(rows(&db), 150);
}

#[test]
fn a_crash_while_the_headers_are_rewritten_leaves_a_log_that_opens() {
    let dir = tempfile::tempdir().unwrap();
    closed_db(dir.path());
    // The rewrite goes from the last file to file 0: a crash between them
    // leaves file 0 at version 1.
    set_version(dir.path(), 0, LOG_VERSION_V1);
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(versions(dir.path()), [LOG_VERSION, LOG_VERSION]);
    assert_eq!(rows(&db), 100);
}

#[test]
fn a_version_1_log_with_changes_to_recover_is_refused_saying_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    closed_db(dir.path());
    for i in 0..2 {
        set_version(dir.path(), i, LOG_VERSION_V1);
    }
    // A group an earlier Keel appended past the checkpoint and crashed.
    let cp = newest_checkpoint(dir.path());
    let mut g = Vec::new();
    format::encode_group_v1(
        kind::TXN_APPLIED,
        cp.lsn,
        cp.epoch,
        &8192u64.to_le_bytes(),
        &mut g,
    );
    write_log(dir.path(), cp.lsn, &g);
    for read_only in [false, true] {
        let err = if read_only {
            Db::open_read_only(dir.path(), opts())
        } else {
            Db::open(dir.path(), opts())
        }
        .err()
        .unwrap();
        let Error::BadFile { path, reason } = &err else {
            panic!("{err}");
        };
        assert!(path.ends_with("redo-0.keel"), "{err}");
        assert!(
            reason.contains("format version 1") && reason.contains("open the database once"),
            "{err}"
        );
    }
    assert_eq!(versions(dir.path()), [LOG_VERSION_V1, LOG_VERSION_V1]);
    // A group of another run's epoch there is stale, not history: nothing
    // to recover.
    let mut g = Vec::new();
    format::encode_group_v1(
        kind::TXN_APPLIED,
        cp.lsn,
        cp.epoch + 1,
        &8192u64.to_le_bytes(),
        &mut g,
    );
    write_log(dir.path(), cp.lsn, &g);
    let admitted = cp.admits(cp.lsn, (cp.epoch + 1) & format::GROUP_EPOCH_MASK);
    let opened = Db::open(dir.path(), opts());
    assert_eq!(opened.is_ok(), !admitted, "{:?}", opened.err());
}
