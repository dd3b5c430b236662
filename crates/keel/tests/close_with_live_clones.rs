#![allow(clippy::unwrap_used)]
//! Closing a database while other handles' writers wait for log space
//! (`classic`: at the free-check limit) or are held by the pacer at the
//! hard level (`steady`): they get `Error::Closed` at once instead of
//! waiting out their 60 s timeout, and the close finishes once the page
//! cleaners can write again. A commit admitted just before the close
//! finishes with the cleaners still running.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use keel::io::faulty::FaultyFs;
use keel::{Db, Error, FlushPolicyName};

#[test]
fn writers_waiting_for_log_space_on_other_handles_get_closed_at_once() {
    closed_at_once(FlushPolicyName::Classic);
}

#[test]
fn writers_held_by_the_pacer_on_other_handles_get_closed_at_once() {
    closed_at_once(FlushPolicyName::Steady);
}

fn closed_at_once(policy: FlushPolicyName) {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    let mut o = common::small_opts(2048);
    o.flush_policy = policy;
    o.flush_method = Default::default();
    o.page_cleaners = 1;
    // Without doublewrite only checkpoints sync the data files, and a
    // checkpoint holds no page latch while it syncs.
    o.doublewrite = keel::DoublewriteMode::Off;
    let db = Db::open_with_fs(dir.path(), o, Some(fs.clone())).unwrap();
    let t = db.create_table("t").unwrap();
    db.flush().unwrap();
    // The page cleaner stops inside its next checkpoint's data-file sync:
    // the checkpoint cannot move, so writers soon wait in the free check.
    let hold = fs.arm("/data-.sync:hold", 0).unwrap();
    // Small rows: leaves split rarely, so writers wait where new commits
    // wait, not inside a split of a commit already logged.
    let writers: Vec<_> = (0..8u32)
        .map(|w| {
            let t = t.clone();
            std::thread::spawn(move || {
                let mut i = 0u32;
                loop {
                    if let Err(e) = t.put(&(w << 24 | i).to_be_bytes(), &[7u8; 16]) {
                        return (e, Instant::now());
                    }
                    i += 1;
                }
            })
        })
        .collect();
    hold.wait_held(Duration::from_secs(10)).unwrap();
    let m = db.metrics();
    let deadline = Instant::now() + Duration::from_secs(20);
    // classic: writers stop at the free-check limit; steady: the pacer holds
    // them at the hard level, short of it.
    let waits = match policy {
        FlushPolicyName::Classic => "log_free_check_waits",
        FlushPolicyName::Steady => "writer_pauses",
    };
    let mut held_since: Option<(Instant, u64)> = None;
    loop {
        let (w, commits) = (m.get(waits).unwrap(), m.get("trx_commits").unwrap());
        let held = match policy {
            FlushPolicyName::Classic => w >= 3,
            // Held: pausing, and no commit for 300 ms.
            FlushPolicyName::Steady => match held_since {
                Some((at, c)) if c == commits => w > 0 && at.elapsed() > Duration::from_millis(300),
                _ => {
                    held_since = Some((Instant::now(), commits));
                    false
                }
            },
        };
        if held {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "writers never waited for log space: age {} of limit {}, {} pauses, {} commits",
            m.get("log_lsn_checkpoint_age").unwrap(),
            m.get("log_free_check_limit").unwrap(),
            m.get("writer_pauses").unwrap(),
            m.get("trx_commits").unwrap(),
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // classic: the writers may all be waiting for room for an operation of
    // a commit already logged (its bound is far larger than a new commit's
    // record, so new commits slip into the room left until every writer
    // waits that way); such a commit must finish, and is refused only at
    // the writer's next commit. So one more writer commits a transaction
    // whose record is larger than all the room left under the limit: it
    // surely waits as a new commit, and the failpoint holds it (or another
    // writer waiting so) just before its wait, until the close has begun.
    let new_commit = (policy == FlushPolicyName::Classic).then(|| {
        // A checkpoint's relocations may take the age past the limit.
        let room = m
            .get("log_free_check_limit")
            .unwrap()
            .saturating_sub(m.get("log_lsn_checkpoint_age").unwrap());
        // A write set of small values is logged keys only: long keys.
        let rows = room / 700 + 2;
        let waiting = db.failpoint("commit.waiting");
        let (db, t) = (db.clone(), t.clone());
        let thread = std::thread::spawn(move || {
            let commit = || {
                let mut tx = db.begin();
                for i in 0..rows as u32 {
                    let mut key = vec![0xffu8; 700];
                    key[696..].copy_from_slice(&i.to_be_bytes());
                    tx.put(&t, &key, b"v")?;
                }
                tx.commit()
            };
            (commit(), Instant::now())
        });
        assert!(
            waiting.wait_held(Duration::from_secs(10)),
            "a commit of {rows} keys of 700 bytes did not wait for {room} bytes of log"
        );
        (waiting, thread)
    });
    let closing = Instant::now();
    let closer = std::thread::spawn(move || db.close());
    // Writers waiting to log a new commit are refused at once. (One whose
    // commit is already logged, waiting for room for an operation, finishes
    // it once the cleaner syncs again, and is refused at its next commit.)
    let new_commit = new_commit.map(|(waiting, thread)| {
        std::thread::sleep(Duration::from_millis(50));
        waiting.release();
        thread
    });
    std::thread::sleep(Duration::from_millis(450));
    let released = Instant::now();
    hold.release();
    closer.join().unwrap().unwrap();
    let mut refused_at_once = 0;
    for w in writers {
        let (e, at) = w.join().unwrap();
        assert!(matches!(e, Error::Closed), "{e}");
        if at < released {
            refused_at_once += 1;
            assert!(at.duration_since(closing) < Duration::from_millis(500));
        }
    }
    if let Some(thread) = new_commit {
        // Waiting as a new commit (held at the failpoint first, or behind
        // the writer held there), it is refused at once.
        let (r, at) = thread.join().unwrap();
        assert!(matches!(r, Err(Error::Closed)), "{r:?}");
        assert!(at < released && at.duration_since(closing) < Duration::from_millis(500));
        refused_at_once += 1;
    }
    assert!(
        refused_at_once > 0,
        "no waiting writer was refused before the cleaner resumed"
    );
    assert!(matches!(t.put(b"late", b"x"), Err(Error::Closed)));
}

/// A commit held after its admission, its record not yet logged, while
/// another handle closes: the close waits for it before it stops the page
/// cleaners, and the commit, released, finishes and is durable. Before,
/// the close counted only commits whose record was logged, found none,
/// and stopped the cleaners; the commit then logged its record, and an
/// operation that needed log space waited for cleaners that were gone (a
/// minute per try, retried for ten minutes, then the engine poisoned).
#[test]
fn a_commit_admitted_before_close_finishes_with_the_cleaners_running() {
    let dir = tempfile::tempdir().unwrap();
    let o = common::small_opts(256);
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let t = db.create_table("t").unwrap();
    let admitted = db.failpoint("commit.admitted");
    let stopping = db.failpoint("close.cleaners_stopping");
    let committer = {
        let (db, t) = (db.clone(), t.clone());
        std::thread::spawn(move || {
            let mut tx = db.begin();
            for i in 0..200u32 {
                tx.put(&t, &i.to_be_bytes(), &[9u8; 300])?;
            }
            tx.commit()
        })
    };
    assert!(admitted.wait_held(Duration::from_secs(10)));
    drop(t);
    let closer = std::thread::spawn(move || db.close());
    // With the commit admitted, the close must not get as far as stopping
    // the cleaners (it did, at once, before).
    let stopped_early = stopping.wait_held(Duration::from_secs(1));
    admitted.release();
    stopping.release();
    assert!(
        !stopped_early,
        "the close stopped the page cleaners with an admitted commit still to log"
    );
    committer.join().unwrap().unwrap();
    closer.join().unwrap().unwrap();
    let db = Db::open(dir.path(), o).unwrap();
    let t = db.table("t").unwrap();
    assert_eq!(t.range(..).unwrap().count(), 200);
    drop(t);
    db.close().unwrap();
}
