#![allow(clippy::unwrap_used)]
//! A redo log sync in progress, held inside its fdatasync by a failpoint of
//! the faulty device: commits that only need their bytes written
//! (`flush_log_at_trx_commit` 2) go on; at 1 a commit returns when a sync
//! that started after its write ends, and not before; a sync touches only
//! the log files written since the last one; a failed sync fails the commit
//! and the engine refuses writes.
//!
//! The log is first filled into its second file and checkpointed there, so
//! that every later log sync (a sync *round*) fdatasyncs `redo-1` only,
//! while a checkpoint syncs only `redo-0` (its slot): a failpoint on
//! `/redo-1.sync` catches log rounds and nothing else, whichever thread,
//! a committer's or a page cleaner's once-a-second flush, runs them.

mod common;

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use keel::io::faulty::{CrashMode, FaultyFs};
use keel::{Db, Error, Options, Table};

const WAIT: Duration = Duration::from_secs(10);

fn opts(trx_commit: u8, log_files: usize) -> Options {
    let mut o = common::small_opts(2048);
    o.flush_method = Default::default();
    o.flush_log_at_trx_commit = trx_commit;
    o.log_files_in_group = log_files;
    o
}

fn metric(db: &Db, name: &str) -> u64 {
    db.metrics().get(name).unwrap()
}

/// A database whose log ends a little way into `redo-1`, everything
/// durable and checkpointed.
fn log_in_second_file(trx_commit: u8) -> (tempfile::TempDir, Arc<FaultyFs>, Db, Table) {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    let db = Db::open_with_fs(dir.path(), opts(trx_commit, 2), Some(fs.clone())).unwrap();
    let t = db.create_table("t").unwrap();
    let cap = metric(&db, "log_capacity");
    let area = cap / 2;
    let mut i = 0u32;
    loop {
        let pos = metric(&db, "log_lsn_current") % cap;
        if pos / area == 1 && pos % area > 8192 {
            break;
        }
        t.put(&i.to_be_bytes(), &[1u8; 1000]).unwrap();
        i += 1;
    }
    db.flush().unwrap();
    (dir, fs, db, t)
}

fn spawn_named(
    name: &str,
    f: impl FnOnce() -> keel::Result<()> + Send + 'static,
) -> JoinHandle<keel::Result<()>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .unwrap()
}

fn join_within(t: JoinHandle<keel::Result<()>>, what: &str) -> keel::Result<()> {
    let deadline = Instant::now() + WAIT;
    while !t.is_finished() {
        assert!(Instant::now() < deadline, "{what} never returned");
        std::thread::sleep(Duration::from_millis(1));
    }
    t.join().unwrap()
}

fn crash_and_reopen(dir: &tempfile::TempDir, fs: &Arc<FaultyFs>, db: Db) -> Db {
    let o = db.options().clone();
    fs.disarm();
    fs.crash(CrashMode::DropUnsynced);
    db.simulate_crash();
    Db::open_with_fs(dir.path(), o, Some(fs.clone())).unwrap()
}

/// While a log sync is held, 100 commits at `trx_commit` (2 or 0) run to
/// the end; at 2 their bytes reach the OS meanwhile.
fn commits_do_not_wait_for_a_held_log_sync(trx_commit: u8) {
    let (_dir, fs, db, t) = log_in_second_file(trx_commit);
    t.put(b"unsynced", b"x").unwrap();
    let hold = fs.arm("/redo-1.sync:hold", 0).unwrap();
    let flusher = {
        let db = db.clone();
        spawn_named("log-flusher", move || db.flush_log())
    };
    let held = hold.wait_held(WAIT).unwrap();
    let written = metric(&db, "log_bytes_written");
    let started = Instant::now();
    for i in 0..100u32 {
        t.put(format!("during-{i}").as_bytes(), &[2u8; 100])
            .unwrap();
    }
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "100 commits at trx_commit {trx_commit} took {took:?} while {held:?} was held"
    );
    if trx_commit == 2 {
        assert!(
            metric(&db, "log_bytes_written") > written,
            "the commits' bytes were written to the OS"
        );
    }
    assert!(
        !flusher.is_finished(),
        "the sync was still held while they committed"
    );
    hold.release();
    join_within(flusher, "the held log flush").unwrap();
}

#[test]
fn commits_at_trx_commit_2_do_not_wait_for_a_held_log_sync() {
    commits_do_not_wait_for_a_held_log_sync(2);
}

#[test]
fn commits_at_trx_commit_0_do_not_wait_for_a_held_log_sync() {
    commits_do_not_wait_for_a_held_log_sync(0);
}

#[test]
fn at_trx_commit_1_a_commit_written_during_a_held_sync_waits_for_the_next_one() {
    let (dir, fs, db, t) = log_in_second_file(1);
    let rounds_before = metric(&db, "os_log_fsyncs");
    let waits_before = metric(&db, "log_sync_waits");
    // The held round must be commit-1's own, so that it covers commit-1;
    // a page cleaner's once-a-second flush may start one first (rarely):
    // then let it pass and try again.
    let mut attempt = 0;
    let (hold1, c1) = loop {
        attempt += 1;
        let hold = fs.arm("/redo-1.sync:hold", 0).unwrap();
        let key = format!("commit-1-{attempt}");
        let c1 = {
            let t = t.clone();
            spawn_named("commit-1", move || {
                t.put(key.as_bytes(), b"one").map(|_| ())
            })
        };
        let held = hold.wait_held(WAIT).unwrap();
        if held.thread.as_deref() == Some("commit-1") {
            break (hold, c1);
        }
        assert!(attempt < 5, "a page cleaner kept taking the held sync");
        hold.release();
        join_within(c1, "a commit").unwrap();
    };
    let writes = metric(&db, "log_writes");
    let c2 = {
        let t = t.clone();
        spawn_named("commit-2", move || t.put(b"commit-2", b"two").map(|_| ()))
    };
    let deadline = Instant::now() + WAIT;
    while metric(&db, "log_writes") == writes {
        assert!(Instant::now() < deadline, "commit-2 never wrote its bytes");
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        !c2.is_finished(),
        "commit-2 returned while the only sync running began before its write"
    );
    // The next round gets held too, before the first one is let go.
    let hold2 = fs.arm("/redo-1.sync:hold", 0).unwrap();
    hold1.release();
    join_within(c1, "commit-1, covered by the held sync").unwrap();
    hold2.wait_held(WAIT).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        !c2.is_finished(),
        "commit-2 returned before a sync that began after its write ended"
    );
    hold2.release();
    join_within(c2, "commit-2").unwrap();
    assert!(metric(&db, "os_log_fsyncs") >= rounds_before + 2);
    assert!(
        metric(&db, "log_sync_waits") >= waits_before + 2,
        "both commits waited for a sync round"
    );
    let db = crash_and_reopen(&dir, &fs, db);
    let t = db.table("t").unwrap();
    assert_eq!(t.get(b"commit-2").unwrap().as_deref(), Some(&b"two"[..]));
    let key = format!("commit-1-{attempt}");
    assert_eq!(t.get(key.as_bytes()).unwrap().as_deref(), Some(&b"one"[..]));
    drop(t);
    db.close().unwrap();
}

#[test]
fn with_three_log_files_commits_sync_only_the_file_they_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    let db = Db::open_with_fs(dir.path(), opts(1, 3), Some(fs.clone())).unwrap();
    let t = db.create_table("t").unwrap();
    // Never fire: they count each file's syncs.
    let counts: Vec<_> = (0..3)
        .map(|i| fs.arm(&format!("/redo-{i}.sync:eio"), u64::MAX).unwrap())
        .collect();
    let rounds = metric(&db, "os_log_fsyncs");
    for i in 0..50u32 {
        t.put(&i.to_be_bytes(), b"small").unwrap();
    }
    let synced: Vec<u64> = counts.iter().map(|c| c.matched()).collect();
    assert!(metric(&db, "os_log_fsyncs") >= rounds + 50);
    assert!(synced[0] >= 50, "{synced:?}");
    assert_eq!(
        synced[1..],
        [0, 0],
        "files the commits never wrote were synced"
    );
}

#[test]
fn a_failed_log_sync_fails_the_commit_and_refuses_further_writes() {
    let (dir, fs, db, t) = log_in_second_file(1);
    t.put(b"before", b"acked").unwrap();
    let eio = fs.arm("/redo-1.sync:eio", 0).unwrap();
    let e = t.put(b"failed", b"x").unwrap_err();
    assert_eq!(eio.fired(), 1);
    assert!(matches!(e, Error::Io { .. } | Error::Poisoned(_)), "{e}");
    assert!(
        e.to_string().contains("redo-1"),
        "the error names the file: {e}"
    );
    assert!(matches!(t.put(b"after", b"x"), Err(Error::Poisoned(_))));
    assert!(db.flush_log().is_err());
    let db = crash_and_reopen(&dir, &fs, db);
    let t = db.table("t").unwrap();
    assert_eq!(t.get(b"before").unwrap().as_deref(), Some(&b"acked"[..]));
    assert_eq!(t.get(b"after").unwrap(), None);
    t.put(b"after", b"x").unwrap();
    drop(t);
    db.close().unwrap();
}
