#![allow(clippy::unwrap_used)]
//! EIO and ENOSPC during log writes, page writes and data-file syncs: the
//! affected transaction gets an error, the engine keeps working or refuses
//! further writes with a clear error — it never hangs and never pretends —
//! and after a restart every acknowledged transaction is intact.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
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

/// Commits of 20 rows of 4 KB each into a table that outgrows the data
/// files' allocation (4 MiB each at first), on a 48-page pool: applying them needs frames, so user
/// threads must write dirty pages themselves, and those writes need the
/// files to grow. A transaction refused with `LogOverloaded` (the
/// checkpoint cannot advance while the disk is full: a passing error), at
/// its first write (where writers are paced) or at commit, is retried as an
/// application would, and counted in `refused`.
fn fill(db: &Db, table: &str, commits: u32, base: u32, refused: &AtomicU64) -> Result<u32, Error> {
    let t = db.table(table)?;
    let v = [5u8; 4000];
    for c in 0..commits {
        loop {
            let attempt = || {
                let mut tx = db.begin();
                for r in 0..20 {
                    tx.put(&t, &((base + c) * 20 + r).to_be_bytes(), &v)?;
                }
                tx.commit()
            };
            match attempt() {
                Ok(_) => break,
                Err(Error::LogOverloaded(msg)) if msg.contains("No space") => {
                    refused.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(commits)
}

#[test]
fn a_full_disk_stalls_commits_without_poisoning_and_they_finish_when_space_returns() {
    let (dir, fs, db) = fresh();
    db.create_table("grow").unwrap();
    let mut rng = SmallRng::seed_from_u64(2);
    let (mut acked, err) = run(&db, 50, 0, &mut rng);
    assert!(err.is_none(), "{err:?}");
    // The disk is full: data files cannot grow (their space is allocated
    // before any page is written in place, so this is where ENOSPC shows).
    fs.arm("/data-.set_len:enospc:sticky", 0).unwrap();
    let refused = Arc::new(AtomicU64::new(0));
    let writer = {
        let db = db.clone();
        let refused = refused.clone();
        std::thread::spawn(move || fill(&db, "grow", 150, 0, &refused))
    };
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let retries = db.metrics().get("trx_apply_retries").unwrap();
    if writer.is_finished() {
        panic!(
            "the writes need room the disk does not have: {:?}",
            writer.join()
        );
    }
    // Either a logged commit is being retried (it must not fail), or new
    // commits are refused with a passing error naming the full disk
    // (whichever the writer met first depends on the cleaners' timing).
    assert!(
        retries > 0 || refused.load(Ordering::Relaxed) > 0,
        "a stalled commit must be retried or refused with a passing error, not failed"
    );
    // A flush says why it cannot finish, naming the file.
    let msg = db.flush().expect_err("the disk is full").to_string();
    assert!(msg.contains("data-") && msg.contains("No space"), "{msg}");
    // Space comes back: the stalled commits finish and nothing was poisoned.
    fs.disarm();
    assert_eq!(writer.join().unwrap().unwrap(), 150);
    db.flush().unwrap();
    let (more, err) = run(&db, 50, 10_000, &mut rng);
    assert!(err.is_none(), "{err:?}");
    acked.extend(more);
    verify(&db, &acked);
    let grow = db.table("grow").unwrap();
    assert_eq!(grow.range(..).unwrap().count(), 150 * 20);
    drop(grow);
    restart_and_verify(&dir, &fs, db, &acked);
}

#[test]
fn a_failed_in_place_write_poisons_and_the_restart_repairs_from_doublewrite() {
    let (dir, fs, db) = fresh();
    let mut rng = SmallRng::seed_from_u64(4);
    let (acked, err) = run(&db, 300, 0, &mut rng);
    assert!(err.is_none());
    // Every in-place page write fails; the doublewrite copies were made.
    fs.arm("/data-.write:eio:sticky", 0).unwrap();
    let err = db.flush().expect_err("page writes fail");
    assert!(err.to_string().contains("data-"), "{err}");
    // The area holding the copies must not be reused: writes are refused.
    let (none, err) = run(&db, 5, 10_000, &mut rng);
    assert!(
        none.is_empty() && matches!(err, Some(Error::Poisoned(_))),
        "{err:?}"
    );
    let msg = err.unwrap().to_string();
    assert!(msg.contains("doublewrite"), "{msg}");
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
