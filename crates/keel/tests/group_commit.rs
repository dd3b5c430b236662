#![allow(clippy::unwrap_used)]
//! Group commit at `flush_log_at_trx_commit` 1: committing threads share
//! log syncs. A loose bound on the real disk (the figures themselves are
//! the `group_commit` bench's), and the race between a sync round's leader
//! and a commit appended while it is held before its write-out, made
//! deterministic by the `log.round.lead` failpoint.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel::io::faulty::{CrashMode, FaultyFs};
use keel::{Db, Options};

const WAIT: Duration = Duration::from_secs(10);

fn opts() -> Options {
    let mut o = common::small_opts(2048);
    // Real fdatasyncs: the point is how many there are.
    o.flush_method = Default::default();
    o.flush_log_at_trx_commit = 1;
    o
}

fn metric(db: &Db, name: &str) -> u64 {
    db.metrics().get(name).unwrap()
}

/// 16 threads committing one-row transactions on their own keys for about
/// 1.5 s share log syncs: at most one sync per two commits (the bench
/// measures how far below; this only catches group commit breaking).
#[test]
fn sixteen_committing_threads_share_log_syncs() {
    const THREADS: u32 = 16;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = db.create_table("t").unwrap();
    let stop = AtomicBool::new(false);
    let commits = AtomicU64::new(0);
    let fsyncs0 = metric(&db, "os_log_fsyncs");
    let started = Instant::now();
    std::thread::scope(|s| {
        for id in 0..THREADS {
            let (t, stop, commits) = (&t, &stop, &commits);
            s.spawn(move || {
                let mut i = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    let key = (id * 1000 + i % 1000).to_be_bytes();
                    t.put(&key, &[0x5a; 100]).unwrap();
                    commits.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            });
        }
        std::thread::sleep(Duration::from_millis(1500));
        stop.store(true, Ordering::Relaxed);
    });
    let took = started.elapsed();
    let n = commits.load(Ordering::Relaxed);
    let syncs = metric(&db, "os_log_fsyncs") - fsyncs0;
    let per_commit = syncs as f64 / n.max(1) as f64;
    println!(
        "{THREADS} threads: {n} commits in {took:?} ({:.0}/s), {syncs} log syncs, \
         {per_commit:.3} per commit, {} gathers",
        n as f64 / took.as_secs_f64(),
        metric(&db, "log_sync_gathers")
    );
    assert!(n >= 50, "only {n} commits");
    assert!(
        per_commit <= 0.5,
        "{syncs} log syncs for {n} commits: {per_commit:.3} per commit"
    );
    drop(t);
    db.close().unwrap();
}

/// A sync round's leader (a commit, or the page cleaner's once-a-second
/// flush) is held after it took the round. A commit appended meanwhile
/// that did not write its bytes itself (`flush_log_at_trx_commit` 0 at
/// that moment) is covered by that same round: the leader writes out
/// everything appended before it reads its target. One round, and a crash
/// right after keeps both commits.
#[test]
fn a_commit_appended_while_the_sync_leader_is_held_is_covered_by_its_round() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    let db = Db::open_with_fs(dir.path(), opts(), Some(fs.clone())).unwrap();
    let t = db.create_table("t").unwrap();
    t.put(b"before", b"0").unwrap();
    let fsyncs0 = metric(&db, "os_log_fsyncs");
    let lead = db.failpoint("log.round.lead");
    let one = {
        let t = t.clone();
        std::thread::spawn(move || t.put(b"one", b"1").map(|_| ()))
    };
    assert!(lead.wait_held(WAIT), "no sync round's leader came");
    db.set_option("flush_log_at_trx_commit", "0").unwrap();
    t.put(b"two", b"2").unwrap();
    db.set_option("flush_log_at_trx_commit", "1").unwrap();
    let end = metric(&db, "log_lsn_current");
    assert!(metric(&db, "log_lsn_last_flush") < end);
    assert_eq!(metric(&db, "os_log_fsyncs"), fsyncs0);
    lead.release();
    let deadline = Instant::now() + WAIT;
    while !one.is_finished() {
        assert!(Instant::now() < deadline, "the held commit never returned");
        std::thread::sleep(Duration::from_millis(1));
    }
    one.join().unwrap().unwrap();
    assert!(
        metric(&db, "log_lsn_last_flush") >= end,
        "the held round did not cover the commit appended while it was held"
    );
    assert_eq!(metric(&db, "os_log_fsyncs"), fsyncs0 + 1, "one round");
    let o = db.options();
    drop(t);
    fs.disarm();
    fs.crash(CrashMode::DropUnsynced);
    db.simulate_crash();
    let db = Db::open_with_fs(dir.path(), o, Some(fs.clone())).unwrap();
    let t = db.table("t").unwrap();
    for (k, v) in [(&b"one"[..], &b"1"[..]), (b"two", b"2"), (b"before", b"0")] {
        assert_eq!(t.get(k).unwrap().as_deref(), Some(v));
    }
    drop(t);
    db.close().unwrap();
}
