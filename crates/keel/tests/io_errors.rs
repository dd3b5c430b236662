#![allow(clippy::unwrap_used)]
//! EIO and ENOSPC during log writes, page writes and data-file syncs: the
//! affected transaction gets an error, the engine keeps working or refuses
//! further writes with a clear error — it never hangs and never pretends —
//! and after a restart every acknowledged transaction is intact.

mod common;

use std::sync::Arc;

use common::bank::{opts, setup, transfer, verify};
use keel::io::faulty::{CrashMode, FaultyFs};
use keel::{Db, Error};
use rand::rngs::SmallRng;
use rand::SeedableRng;

/// Run up to `n` transfers; returns the acknowledged ids and the first error.
fn run(db: &Db, n: u64, base: u64, rng: &mut SmallRng) -> (Vec<u64>, Option<Error>) {
    let mut acked = Vec::new();
    for i in 0..n {
        match transfer(db, rng, base + i) {
            Ok(true) => acked.push(base + i),
            Ok(false) => {}
            Err(e) => return (acked, Some(e)),
        }
    }
    (acked, None)
}

fn fresh() -> (tempfile::TempDir, Arc<FaultyFs>, Db) {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    let db = Db::open_with_fs(dir.path(), opts(), Some(fs.clone())).unwrap();
    setup(&db);
    db.flush().unwrap();
    (dir, fs, db)
}

fn restart_and_verify(dir: &tempfile::TempDir, fs: &Arc<FaultyFs>, db: Db, acked: &[u64]) {
    db.simulate_crash();
    fs.disarm();
    fs.crash(CrashMode::DropUnsynced);
    let db = Db::open_with_fs(dir.path(), opts(), Some(fs.clone())).unwrap();
    verify(&db, acked);
    // And the engine takes writes again.
    let mut rng = SmallRng::seed_from_u64(9);
    let (more, err) = run(&db, 50, 1 << 40, &mut rng);
    assert!(err.is_none(), "writes after restart failed: {err:?}");
    assert!(!more.is_empty());
    db.close().unwrap();
}

#[test]
fn eio_on_log_write_fails_the_commit_and_refuses_further_writes() {
    let (dir, fs, db) = fresh();
    let mut rng = SmallRng::seed_from_u64(1);
    let (mut acked, err) = run(&db, 200, 0, &mut rng);
    assert!(err.is_none());
    fs.arm("redo.write:eio:sticky", 0).unwrap();
    let (more, err) = run(&db, 200, 1000, &mut rng);
    acked.extend(more);
    let err = err.expect("a commit must fail when the log cannot be written");
    assert!(
        matches!(err, Error::Io { .. } | Error::Poisoned(_)),
        "{err}"
    );
    assert!(
        err.to_string().contains("redo-"),
        "the error names the log file: {err}"
    );
    // Refuses further writes, clearly.
    fs.disarm();
    let (none, err) = run(&db, 5, 2000, &mut rng);
    assert!(none.is_empty());
    assert!(matches!(err, Some(Error::Poisoned(_))), "{err:?}");
    restart_and_verify(&dir, &fs, db, &acked);
}

#[test]
fn enospc_on_page_writes_fails_the_flush_and_the_engine_keeps_working() {
    let (dir, fs, db) = fresh();
    let mut rng = SmallRng::seed_from_u64(2);
    fs.arm("data.write:enospc:sticky", 0).unwrap();
    let (mut acked, err) = run(&db, 300, 0, &mut rng);
    assert!(err.is_none(), "commits need only the log: {err:?}");
    let err = db
        .flush()
        .expect_err("page writes fail while the disk is full");
    let msg = err.to_string();
    assert!(msg.contains("data-") && msg.contains("No space"), "{msg}");
    // Space comes back: the dirty pages are still dirty, the next flush
    // writes them, and the engine goes on as if nothing happened.
    fs.disarm();
    db.flush().unwrap();
    let (more, err) = run(&db, 300, 10_000, &mut rng);
    assert!(err.is_none(), "{err:?}");
    acked.extend(more);
    verify(&db, &acked);
    restart_and_verify(&dir, &fs, db, &acked);
}

#[test]
fn eio_on_data_sync_poisons_instead_of_pretending() {
    let (dir, fs, db) = fresh();
    let mut rng = SmallRng::seed_from_u64(3);
    let (acked, err) = run(&db, 300, 0, &mut rng);
    assert!(err.is_none());
    fs.arm("data.sync:eio", 0).unwrap();
    let err = db
        .flush()
        .expect_err("a failed data-file sync must surface as an error");
    assert!(
        err.to_string().contains("data-"),
        "the error names the data file: {err}"
    );
    // Once only: the next sync would succeed, but the engine no longer
    // trusts the data files and refuses writes until restarted.
    let (none, err) = run(&db, 5, 10_000, &mut rng);
    assert!(
        none.is_empty() && matches!(err, Some(Error::Poisoned(_))),
        "{err:?}"
    );
    restart_and_verify(&dir, &fs, db, &acked);
}
