#![allow(clippy::unwrap_used)]
//! A page cleaner that panics does not take its duties with it: the
//! coordinator is started again, so commits at `flush_log_at_trx_commit`
//! 0 and 2 still become durable within about a second and checkpoints go
//! on; a cleaner that keeps panicking makes the engine refuse writes with
//! an error that says so, instead of writers timing out again and again.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel::io::faulty::{CrashMode, FaultyFs};
use keel::{Db, Error, Options};

fn opts(flush_log_at_trx_commit: u8) -> Options {
    let mut o = common::small_opts(256);
    o.flush_log_at_trx_commit = flush_log_at_trx_commit;
    o
}

fn open(dir: &Path, fs: &Arc<FaultyFs>, o: &Options) -> Db {
    Db::open_with_fs(dir, o.clone(), Some(fs.clone())).unwrap()
}

/// Wait until metric `name` reaches `at_least`, for at most 10 s.
fn wait_metric(db: &Db, name: &str, at_least: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while db.metrics().get(name).unwrap() < at_least {
        assert!(
            Instant::now() < deadline,
            "{name} stayed at {}",
            db.metrics().get(name).unwrap()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The coordinator panics in its round, before its once-a-second log
/// flush; a commit at `flush_log_at_trx_commit = 2` made after that is
/// synced by the restarted coordinator, and survives a power loss. Before,
/// the coordinator's thread died there, the commit was never synced (the
/// power loss lost it) and no cleaner round ran again.
#[test]
fn a_commit_at_level_2_is_synced_after_the_coordinator_panicked() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    let o = opts(2);
    let db = open(dir.path(), &fs, &o);
    let t = db.create_table("t").unwrap();
    let panicked = db.failpoint_panic("cleaner.tick");
    assert!(panicked.wait_held(Duration::from_secs(10)));
    t.put(b"after the panic", b"kept").unwrap();
    let committed = db.metrics().get("log_lsn_current").unwrap();
    // The restarted coordinator flushes the log about a second later.
    let deadline = Instant::now() + Duration::from_secs(10);
    while db.metrics().get("log_lsn_last_flush").unwrap() < committed {
        assert!(Instant::now() < deadline, "the log was never synced");
        std::thread::sleep(Duration::from_millis(10));
    }
    let rounds = db.metrics().get("buffer_flush_cleaner_rounds").unwrap();
    wait_metric(&db, "buffer_flush_cleaner_rounds", rounds + 2);
    assert_eq!(db.metrics().get("buffer_flush_cleaner_panics").unwrap(), 1);
    fs.crash(CrashMode::DropUnsynced);
    drop(t);
    db.simulate_crash();
    let db = open(dir.path(), &fs, &o);
    let got = db.table("t").unwrap().get(b"after the panic").unwrap();
    assert_eq!(got.as_deref(), Some(&b"kept"[..]));
    db.close().unwrap();
}

/// After `MAX_PANICS` (3) panics the engine refuses writes, quoting the
/// panic; reads still work, and a restart writes again. Before, the first
/// panic ended the coordinator silently and writes went on being accepted
/// with nothing syncing them at level 0.
#[test]
fn cleaners_that_keep_panicking_make_writes_fail_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    let o = opts(0);
    let db = open(dir.path(), &fs, &o);
    let t = db.create_table("t").unwrap();
    t.put(b"before", b"v").unwrap();
    let holds: Vec<_> = (0..3).map(|_| db.failpoint_panic("cleaner.tick")).collect();
    for h in &holds {
        assert!(h.wait_held(Duration::from_secs(10)));
    }
    wait_metric(&db, "buffer_flush_cleaner_panics", 3);
    match t.put(b"refused", b"v") {
        Err(Error::Poisoned(why)) => {
            assert!(why.contains("panicked 3 times"), "{why}");
            assert!(
                why.contains("failpoint `cleaner.tick` armed to panic"),
                "{why}"
            );
        }
        other => panic!("expected Poisoned, got {other:?}"),
    }
    assert_eq!(t.get(b"before").unwrap().as_deref(), Some(&b"v"[..]));
    drop(t);
    db.close().unwrap();
    let db = open(dir.path(), &fs, &o);
    let t = db.table("t").unwrap();
    t.put(b"after a restart", b"v").unwrap();
    assert_eq!(t.get(b"before").unwrap().as_deref(), Some(&b"v"[..]));
    drop(t);
    db.close().unwrap();
}
