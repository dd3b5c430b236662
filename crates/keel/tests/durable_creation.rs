#![allow(clippy::unwrap_used)]
//! A database is created durably: its log and doublewrite files are
//! allocated whole and every name is synced into the directory; a creation
//! cut short at any step (an I/O error, a full disk, a power loss) is done
//! again at the next open instead of leaving a directory that every later
//! open refuses; a table is durable once `create_table` returns.

mod common;

use std::path::Path;
use std::sync::Arc;

use keel::io::faulty::{CrashMode, FaultyFs};
use keel::io::{FileSystem, OpenMode};
use keel::{Db, Options};

fn open(dir: &Path, fs: &Arc<FaultyFs>, o: &Options) -> keel::Result<Db> {
    Db::open_with_fs(dir, o.clone(), Some(fs.clone()))
}

/// Every kind of call creation makes, on every kind of file.
const POINTS: [&str; 10] = [
    "/data-.write",
    "/data-.sync",
    "/data-.set_len",
    "/redo-.write",
    "/redo-.sync",
    "/redo-.set_len",
    "/dblwr-.write",
    "/dblwr-.sync",
    "/dblwr-.set_len",
    ".sync_dir",
];

/// The next open after a creation that failed creates the database anew,
/// and it works: a table, a row, a clean close, a reopen that finds both.
fn next_open_creates_and_works(dir: &Path, fs: &Arc<FaultyFs>, o: &Options, case: &str) {
    let db = open(dir, fs, o).unwrap_or_else(|e| panic!("{case}: the next open failed: {e}"));
    assert_eq!(db.table_names().unwrap(), Vec::<String>::new(), "{case}");
    db.create_table("t").unwrap().put(b"k", b"v").unwrap();
    db.close().unwrap();
    let db = open(dir, fs, o).unwrap();
    let got = db.table("t").unwrap().get(b"k").unwrap();
    assert_eq!(got.as_deref(), Some(&b"v"[..]), "{case}");
    db.close().unwrap();
}

/// Each of the calls creation makes fails in turn (EIO, ENOSPC) or loses
/// the power: the open fails, and the next one creates the database
/// again. Before, a database counted as created once `data-0` existed, so
/// a creation that failed after the data files left a directory that
/// every later open refused ("the data files exist but the redo log does
/// not", or a page never written).
#[test]
fn a_creation_cut_short_at_any_step_is_done_again_at_the_next_open() {
    let o = common::small_opts(256);
    let mut cut_short = 0;
    for point in POINTS {
        for action in ["eio", "enospc", "crash"] {
            for after in 0.. {
                let dir = tempfile::tempdir().unwrap();
                let fs = Arc::new(FaultyFs::new());
                let spec = format!("{point}:{action}");
                fs.arm(&spec, after).unwrap();
                let case = format!("`{spec}` after {after} calls");
                match open(dir.path(), &fs, &o) {
                    Ok(db) => {
                        // Creation is over before this call: a later one
                        // (a cleaner's) may still fail; nothing to check.
                        fs.disarm();
                        db.simulate_crash();
                        break;
                    }
                    Err(e) => eprintln!("{case}: {e}"),
                }
                fs.disarm();
                cut_short += 1;
                next_open_creates_and_works(dir.path(), &fs, &o, &case);
            }
        }
    }
    assert!(
        cut_short >= 3 * POINTS.len(),
        "{cut_short} creations cut short"
    );
}

/// The redo and doublewrite files hold their whole length in allocated,
/// durable bytes once the database is open (a log write cannot meet a
/// full disk later), and no name created is waiting for a directory sync
/// (with and without the doublewrite files, whose format syncs the
/// directory last when they are there).
#[test]
fn log_and_doublewrite_files_are_allocated_whole_and_their_names_synced() {
    for doublewrite in [true, false] {
        let mut o = common::small_opts(256);
        o.doublewrite = keel::DoublewriteMode::from_bool(doublewrite);
        allocated_whole_and_named(&o);
    }
}

fn allocated_whole_and_named(o: &Options) {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    let db = open(dir.path(), &fs, o).unwrap();
    let mut seen = 0;
    for path in fs.paths() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("redo-") && !name.starts_with("dblwr-") {
            continue;
        }
        let durable = fs.durable_image(&path).unwrap().len() as u64;
        if name.starts_with("redo-") {
            assert_eq!(durable, o.log_file_size, "{name}");
        }
        assert!(durable > 0, "{name}");
        assert_eq!(fs.allocated_len(&path), Some(durable), "{name}");
        seen += 1;
    }
    assert!(seen >= 2, "{seen} files");
    assert_eq!(fs.unsynced_dir_entries(), Vec::<std::path::PathBuf>::new());
    db.close().unwrap();
}

/// On real files the log's blocks are allocated (fallocate, or zeros
/// written), not a sparse length.
#[test]
fn on_real_files_the_log_holds_every_block_of_its_length() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let o = common::small_opts(256);
    Db::open(dir.path(), o.clone()).unwrap().close().unwrap();
    for i in 0..o.log_files_in_group {
        let m = std::fs::metadata(dir.path().join(format!("redo-{i}.keel"))).unwrap();
        assert_eq!(m.len(), o.log_file_size);
        assert!(
            m.blocks() * 512 >= m.len(),
            "redo-{i}: {} blocks",
            m.blocks()
        );
    }
}

/// `create_table` is durable when it returns, at every
/// `flush_log_at_trx_commit`: before, the catalog entry waited for the
/// next log sync, and a crash right after lost the table.
#[test]
fn a_crash_right_after_create_table_returns_keeps_the_table() {
    for flush_log_at_trx_commit in [1, 2, 0] {
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(FaultyFs::new());
        let mut o = common::small_opts(256);
        o.flush_log_at_trx_commit = flush_log_at_trx_commit;
        let db = open(dir.path(), &fs, &o).unwrap();
        db.create_table("kept").unwrap();
        fs.crash(CrashMode::DropUnsynced);
        db.simulate_crash();
        let db = open(dir.path(), &fs, &o).unwrap();
        assert_eq!(
            db.table_names().unwrap(),
            vec!["kept".to_string()],
            "flush_log_at_trx_commit = {flush_log_at_trx_commit}"
        );
        db.close().unwrap();
    }
}

/// A database created in full whose `data-0` header was zeroed later is
/// not mistaken for an unfinished creation: the open is refused, naming
/// both files, and nothing is removed (the header put back, it opens).
#[test]
fn a_database_whose_first_header_was_lost_is_refused_not_created_again() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    let o = common::small_opts(256);
    let db = open(dir.path(), &fs, &o).unwrap();
    db.create_table("t").unwrap().put(b"k", b"v").unwrap();
    db.close().unwrap();
    let data0 = dir.path().join("data-0.keel");
    let header = fs.durable_image(&data0).unwrap()[..4096].to_vec();
    fs.write_durable(&data0, 0, &[0; 4096]).unwrap();
    let msg = open(dir.path(), &fs, &o).err().unwrap().to_string();
    assert!(
        msg.contains("data-0.keel") && msg.contains("redo-0.keel") && msg.contains("checkpoint"),
        "{msg}"
    );
    fs.write_durable(&data0, 0, &header).unwrap();
    let db = open(dir.path(), &fs, &o).unwrap();
    let got = db.table("t").unwrap().get(b"k").unwrap();
    assert_eq!(got.as_deref(), Some(&b"v"[..]));
    db.close().unwrap();
}

/// A redo log with no data files beside it belongs to something else:
/// creation refuses it before creating anything.
#[test]
fn a_stray_redo_log_is_refused_before_any_file_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    let redo0 = dir.path().join("redo-0.keel");
    fs.open(&redo0, OpenMode::CreateNew).unwrap();
    let msg = open(dir.path(), &fs, &common::small_opts(256))
        .err()
        .unwrap()
        .to_string();
    assert!(msg.contains("redo-0.keel"), "{msg}");
    assert_eq!(fs.paths(), vec![redo0]);
}
