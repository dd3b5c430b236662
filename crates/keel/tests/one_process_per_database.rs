#![allow(clippy::unwrap_used)]
//! One process per database: `Db::open` locks the directory, a second open
//! (here, in the same process) fails at once with `Error::Locked` naming
//! the directory and the holder, and the lock goes with the holder: at
//! close, when the last handle is dropped, at a simulated crash (as a dying
//! process's), after a failed open, and, on the faulty file system, at a
//! power loss. The two-process cases are the CLI's tests
//! (`crates/keel-cli/tests/check.rs`).

mod common;

use std::path::Path;
use std::sync::Arc;

use keel::io::faulty::{CrashMode, FaultyFs};
use keel::{Db, Error, Options};

fn opts() -> Options {
    common::small_opts(64)
}

/// The open must fail with `Locked`, naming `dir` and this process.
fn assert_locked(r: keel::Result<Db>, dir: &Path) {
    match r {
        Err(e @ Error::Locked { .. }) => {
            let Error::Locked { dir: d, pid } = &e else {
                unreachable!()
            };
            assert_eq!(d, dir);
            assert_eq!(*pid, Some(std::process::id()));
            let msg = e.to_string();
            assert!(
                msg.contains(&dir.display().to_string())
                    && msg.contains(&format!("pid {}", std::process::id()))
                    && msg.contains("this process"),
                "{msg}"
            );
        }
        Err(other) => panic!("expected Error::Locked, got {other}"),
        Ok(_) => panic!("a second open of {} succeeded", dir.display()),
    }
}

#[test]
fn a_second_open_in_the_same_process_fails_at_once_naming_the_directory_and_pid() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    db.create_table("t").unwrap().put(b"k", b"v").unwrap();
    assert_locked(Db::open(dir.path(), opts()), dir.path());
    // The refused open changed nothing the holder sees.
    assert_eq!(db.table("t").unwrap().get(b"k").unwrap().unwrap(), b"v");
    db.close().unwrap();
}

#[test]
fn after_close_the_directory_opens_again() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    db.create_table("t").unwrap().put(b"k", b"v").unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(db.table("t").unwrap().get(b"k").unwrap().unwrap(), b"v");
    db.close().unwrap();
}

#[test]
fn a_close_unlocks_even_while_a_clone_of_the_handle_lives() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let clone = db.clone();
    db.close().unwrap();
    let again = Db::open(dir.path(), opts()).unwrap();
    // The clone takes no writes: it cannot touch the files the new open has.
    assert!(matches!(clone.create_table("t"), Err(Error::Closed)));
    drop(clone);
    again.close().unwrap();
}

#[test]
fn the_lock_is_held_until_the_last_handle_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let table = db.create_table("t").unwrap();
    drop(db);
    // The table handle keeps the database open, and so locked.
    assert_locked(Db::open(dir.path(), opts()), dir.path());
    table.put(b"k", b"v").unwrap();
    drop(table);
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(db.table("t").unwrap().get(b"k").unwrap().unwrap(), b"v");
    db.close().unwrap();
}

#[test]
fn after_a_simulated_crash_the_directory_reopens_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = db.create_table("t").unwrap();
    for i in 0..200u32 {
        t.put(&i.to_be_bytes(), b"committed").unwrap();
    }
    // A dying process unlocks whatever handles it still had: the table
    // handle outlives the crash (unused), as other threads' handles do in
    // the crash tests.
    db.simulate_crash();
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(db.table("t").unwrap().range(..).unwrap().count(), 200);
    drop(t);
    db.close().unwrap();
}

#[test]
fn a_failed_open_leaves_the_directory_unlocked() {
    let dir = tempfile::tempdir().unwrap();
    Db::open(dir.path(), opts()).unwrap().close().unwrap();
    // The page size is checked against the files after the lock is taken.
    let mut wrong = opts();
    wrong.page_size = 8192;
    wrong.buffer_pool_size = 64 * 8192;
    assert!(matches!(
        Db::open(dir.path(), wrong),
        Err(Error::BadFile { .. })
    ));
    Db::open(dir.path(), opts()).unwrap().close().unwrap();
}

#[test]
fn on_the_faulty_file_system_one_open_at_a_time_and_a_power_loss_unlocks() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    let open = || Db::open_with_fs(dir.path(), opts(), Some(fs.clone()));
    let db = open().unwrap();
    db.create_table("t").unwrap().put(b"k", b"v").unwrap();
    db.flush().unwrap();
    assert_locked(open(), dir.path());
    // Power fails: the holder is dead though its handle is not dropped.
    fs.crash(CrashMode::DropUnsynced);
    let new = open().unwrap();
    assert_eq!(new.table("t").unwrap().get(b"k").unwrap().unwrap(), b"v");
    // The dead holder's drop must not unlock the directory for a third.
    drop(db);
    assert_locked(open(), dir.path());
    new.close().unwrap();
    open().unwrap().close().unwrap();
}
