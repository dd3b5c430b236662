//! What recovery trusts (module doc of `recovery`): log and page writes
//! that a crashed process made but never synced are made durable before
//! anything rests on them, a valid group that an earlier run left past the
//! recovered end is never taken for history, and a commit's record stays
//! ahead of the checkpoint until its marker is durable.

use std::path::Path;
use std::sync::Arc;

use crate::config::Options;
use crate::io::faulty::{CrashMode, FaultyFs};
use crate::io::FileSystem;
use crate::page::{page_id, page_lsn, verify_page, Lsn};
use crate::Db;

const PS: usize = 4096;

/// Small pages, a small pool, one data file and a 2 × 1 MiB log (the
/// upgrade tests of `redo` open their databases so too).
pub(in crate::redo) fn opts() -> Options {
    Options {
        page_size: PS,
        buffer_pool_size: 256 * PS as u64,
        data_files: 1,
        log_files_in_group: 2,
        log_file_size: 1 << 20,
        ..Options::default()
    }
}

fn open(dir: &Path, fs: &Arc<FaultyFs>) -> Db {
    Db::open_with_fs(dir, opts(), Some(fs.clone() as Arc<dyn FileSystem>)).unwrap()
}

/// The newest page LSN among the pages the data files hold durably.
fn newest_durable_page_lsn(fs: &FaultyFs) -> Lsn {
    let mut newest = 0;
    for path in fs.paths() {
        if !path.to_string_lossy().contains("/data-") {
            continue;
        }
        let image = fs.durable_image(&path).unwrap();
        for page in image.chunks_exact(PS) {
            if verify_page(page, page_id(page)).is_ok() {
                newest = newest.max(page_lsn(page));
            }
        }
    }
    newest
}

fn key(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}

#[test]
fn a_power_loss_during_the_open_after_a_process_crash_loses_no_acknowledged_commit() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    let db = open(dir.path(), &fs);
    let t = db.create_table("t").unwrap();
    // Move the log into its second file, so that syncing the first (as a
    // checkpoint does) leaves the tail below unsynced.
    let filler = db.create_table("filler").unwrap();
    let log = &db.inner.engine.log;
    let mut i = 0u32;
    while log.lsn() < super::super::START_LSN + (1 << 20) {
        filler.put(&key(i), &[7u8; 1000]).unwrap();
        i += 1;
    }
    drop(filler);
    db.flush().unwrap();
    // Commits that write nothing themselves; any sync of the log (the
    // cleaners' once a second) is delayed past the process's death, which
    // fails it, so the tail stays unsynced.
    db.set_option("flush_log_at_trx_commit", "0").unwrap();
    fs.arm("/redo-.sync:delay=2000ms", 0).unwrap();
    for i in 0..40 {
        t.put(&key(i), b"unsynced").unwrap();
    }
    log.write_up_to(log.lsn(), false).unwrap();
    let tail_end = log.lsn();
    assert!(log.flushed_lsn() < tail_end);
    // The process dies: what it wrote stays readable, not durable.
    drop(t);
    fs.kill_process();
    fs.disarm();
    db.simulate_crash();

    // The next open replays that tail, starts its epoch (a checkpoint slot
    // written to the first log file) and ends with a sharp checkpoint: the
    // replayed pages are written and synced, then the power fails as the
    // slot is written.
    fs.arm("/redo-0.keel.write:crash", 1).unwrap();
    let reopened = Db::open_with_fs(dir.path(), opts(), Some(fs.clone() as Arc<dyn FileSystem>));
    assert!(reopened.is_err(), "the open was to lose power");
    fs.disarm();
    let newest_page = newest_durable_page_lsn(&fs);

    let db = open(dir.path(), &fs);
    let end = db.inner.engine.log.lsn();
    assert!(
        newest_page <= end,
        "a durable page carries LSN {newest_page}, past the durable end of the log {end}"
    );
    // An acknowledged commit on the same page survives the next crash:
    // had the log reused LSNs a page already carries, recovery would skip it.
    db.set_option("flush_log_at_trx_commit", "1").unwrap();
    let t = db.table("t").unwrap();
    t.put(&key(0), b"acknowledged").unwrap();
    drop(t);
    fs.crash(CrashMode::DropUnsynced);
    db.simulate_crash();
    let db = open(dir.path(), &fs);
    let t = db.table("t").unwrap();
    assert_eq!(
        t.get(&key(0)).unwrap().as_deref(),
        Some(&b"acknowledged"[..])
    );
    t.check().unwrap();
}

#[test]
fn a_stale_group_past_the_recovered_end_is_not_replayed_after_new_history_reaches_it() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    let db = open(dir.path(), &fs);
    let t = db.create_table("t").unwrap();
    db.flush().unwrap();
    // Two commits written to the log, not synced: each commit writes out
    // what was appended before it, so the second write-out holds the first
    // commit's page changes and the second commit's record.
    db.set_option("flush_log_at_trx_commit", "2").unwrap();
    // A background sync of the log (once a second) would make both
    // durable: delay any past the power loss, which fails it.
    fs.arm("/redo-.sync:delay=2000ms", 0).unwrap();
    let log = &db.inner.engine.log;
    let start = log.lsn();
    t.put(b"a", b"first").unwrap();
    let after_a = log.lsn();
    t.put(b"b", b"second").unwrap();
    drop(t);
    // Power fails; the disk's cache had written the second write-out and
    // not the first: a hole, and valid groups after it.
    let report = fs.crash(CrashMode::LoseOldest);
    fs.disarm();
    assert!(
        report.writes_lost >= 1 && report.writes_kept >= 1,
        "{report:?}"
    );
    db.simulate_crash();

    // The log recovers to the hole: neither commit is there.
    let db = open(dir.path(), &fs);
    let log = &db.inner.engine.log;
    assert_eq!(log.lsn(), start, "recovery ends at the lost write-out");
    let t = db.table("t").unwrap();
    assert_eq!(t.get(b"a").unwrap(), None);
    assert_eq!(t.get(b"b").unwrap(), None);
    // The same commit again, durably: its groups end exactly where the
    // surviving ones of the crashed run begin.
    t.put(b"a", b"first").unwrap();
    assert_eq!(
        log.lsn(),
        after_a,
        "the new history must reach the stale groups"
    );
    drop(t);
    fs.crash(CrashMode::DropUnsynced);
    db.simulate_crash();

    // "b" was absent in the last run; it must not come back.
    let db = open(dir.path(), &fs);
    let t = db.table("t").unwrap();
    assert_eq!(t.get(b"a").unwrap().as_deref(), Some(&b"first"[..]));
    assert_eq!(t.get(b"b").unwrap(), None, "a stale commit was replayed");
    t.check().unwrap();
}

/// A page write the crashed process made and never synced is readable by
/// the next open, which skips the redo it covers; the sharp checkpoint that
/// ends the open then passes that redo. Unless the open makes the data
/// files durable before it trusts them, a power loss drops the write and
/// the next recovery starts past the redo that would rebuild the page: an
/// acknowledged commit lost. Under `doublewrite = on` the repair synced
/// every data file already; under `off` nothing did (this failed before).
#[test]
fn page_writes_a_crashed_process_never_synced_are_made_durable_before_a_checkpoint_passes_them() {
    for mode in [crate::DoublewriteMode::Off, crate::DoublewriteMode::On] {
        unsynced_page_writes_of_a_crashed_process(mode);
    }
}

fn unsynced_page_writes_of_a_crashed_process(mode: crate::DoublewriteMode) {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    let open = |dir: &Path, fs: &Arc<FaultyFs>| {
        let o = Options {
            doublewrite: mode,
            ..opts()
        };
        Db::open_with_fs(dir, o, Some(fs.clone() as Arc<dyn FileSystem>)).unwrap()
    };
    let db = open(dir.path(), &fs);
    let t = db.create_table("t").unwrap();
    for i in 0..20 {
        t.put(&key(i), b"before").unwrap();
    }
    db.flush().unwrap();
    // Acknowledged: its redo is durable. Its pages are written by the
    // flush below, whose data-file sync is held until the process dies.
    t.put(&key(7), b"acknowledged").unwrap();
    drop(t);
    let written_before = db.metrics().get("os_data_writes").unwrap();
    let hold = fs.arm("/data-.sync:hold", 0).unwrap();
    let flusher = {
        let db = db.clone();
        std::thread::spawn(move || db.flush())
    };
    hold.wait_held(std::time::Duration::from_secs(10)).unwrap();
    fs.kill_process();
    hold.release();
    assert!(flusher.join().unwrap().is_err(), "the flush was to fail");
    assert!(
        db.metrics().get("os_data_writes").unwrap() > written_before,
        "the flush wrote no page in place before its sync"
    );
    fs.disarm();
    db.simulate_crash();

    // The next open finds the written page in the OS's cache, as it were,
    // replays nothing onto it and checkpoints past its redo; then the power
    // fails, losing every write no sync covered.
    let db = open(dir.path(), &fs);
    fs.crash(CrashMode::DropUnsynced);
    db.simulate_crash();

    let db = open(dir.path(), &fs);
    let t = db.table("t").unwrap();
    assert_eq!(
        t.get(&key(7)).unwrap().as_deref(),
        Some(&b"acknowledged"[..]),
        "an acknowledged commit was lost"
    );
    t.check().unwrap();
}

/// A commit's marker ends it in memory, not on disk: a sync that covered
/// its first operation and not the rest, then a checkpoint past its record
/// while the marker waits to be written, and a crash keeps the first
/// operation alone unless the record's pin holds until the marker is
/// durable (`redo::inflight`). Both rows of the commit, or neither, must be
/// there after recovery.
/// Tables `t` and `u` with row `k` "old" in both, durable, and a commit
/// setting both rows "new" held at `commit.between_ops` after its first
/// operation (t's row), at `flush_log_at_trx_commit = 0` (nothing of the
/// commit asks for a sync); the log is then synced, making the record and
/// that operation durable. Returns the database, the tables, the hold
/// (still holding), the committing thread and the record's LSN.
#[allow(clippy::type_complexity)]
fn a_commit_held_after_its_first_operation_synced(
    dir: &Path,
    fs: &Arc<FaultyFs>,
) -> (
    Db,
    crate::Table,
    crate::Table,
    Arc<crate::failpoint::Hold>,
    std::thread::JoinHandle<crate::error::Result<()>>,
    Lsn,
) {
    let db = open(dir, fs);
    let (t, u) = (db.create_table("t").unwrap(), db.create_table("u").unwrap());
    t.put(b"k", b"old").unwrap();
    u.put(b"k", b"old").unwrap();
    db.flush().unwrap();
    db.set_option("flush_log_at_trx_commit", "0").unwrap();
    let hold = db.failpoint("commit.between_ops");
    let writer = {
        let (db, t, u) = (db.clone(), t.clone(), u.clone());
        std::thread::spawn(move || {
            let mut tx = db.begin();
            tx.put(&t, b"k", b"new").unwrap();
            tx.put(&u, b"k", b"new").unwrap();
            tx.commit().map(|_| ())
        })
    };
    assert!(hold.wait_held(std::time::Duration::from_secs(10)));
    let log = &db.inner.engine.log;
    let record = log.commit_snapshot().1[0];
    log.write_up_to(log.lsn(), true).unwrap();
    (db, t, u, hold, writer, record)
}

/// [`a_commit_held_after_its_first_operation_synced`], then the power
/// fails (the commit's second operation finds the device gone) and the
/// engine is opened again, nothing recovered yet. Returns it and the
/// commit record's LSN.
fn the_engine_after_a_crash_in_a_commit(
    dir: &Path,
    fs: &Arc<FaultyFs>,
) -> (crate::engine::Engine, Lsn) {
    let (db, t, u, hold, writer, record) = a_commit_held_after_its_first_operation_synced(dir, fs);
    fs.crash(CrashMode::DropUnsynced);
    hold.release();
    let _ = writer.join().unwrap();
    drop((t, u));
    db.simulate_crash();
    let (e, created) = crate::engine::Engine::open(
        dir,
        opts(),
        Some(fs.clone() as Arc<dyn FileSystem>),
        crate::btree::node::validate,
    )
    .unwrap();
    assert!(!created);
    (e, record)
}

#[test]
fn a_checkpoint_does_not_pass_a_commit_whose_marker_is_not_durable() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    let (db, t, u, hold, writer, record) =
        a_commit_held_after_its_first_operation_synced(dir.path(), &fs);
    let log = db.inner.engine.log.clone();
    hold.release();
    writer.join().unwrap().unwrap();
    let marker_end = log.lsn();
    // Its pages are dirty since after the record, and the log is durable
    // past the record: only the pin keeps the checkpoint at the record,
    // until the marker is durable (which this checkpoint may make it).
    db.inner.engine.checkpoint().unwrap();
    assert!(
        log.checkpoint_lsn() <= record || log.flushed_lsn() >= marker_end,
        "the checkpoint ({}) passed the record ({record}) of a commit whose marker (ending at \
         {marker_end}) is not durable (the log is durable to {})",
        log.checkpoint_lsn(),
        log.flushed_lsn()
    );
    drop((t, u));
    fs.crash(CrashMode::DropUnsynced);
    db.simulate_crash();

    let db = open(dir.path(), &fs);
    let (t, u) = (db.table("t").unwrap(), db.table("u").unwrap());
    let rows = (t.get(b"k").unwrap(), u.get(b"k").unwrap());
    assert_eq!(
        rows.0, rows.1,
        "after recovery one row of the commit is new and the other old: {rows:?}"
    );
    t.check().unwrap();
    u.check().unwrap();
}

/// Recovery hands up the commits it found logged and not finished, and the
/// open finishes them one at a time while the page cleaners run, any of
/// which may checkpoint meanwhile. Each such commit must pin the checkpoint
/// from the moment recovery returns: a checkpoint taken before its turn
/// (here the test's, right after recovery) would make its replayed first
/// operation durable and pass its record, and a power loss then keeps that
/// operation alone for good (`recovery`, "Unfinished commits pin the
/// checkpoint").
#[test]
fn a_checkpoint_after_recovery_does_not_pass_a_commit_it_has_not_finished_yet() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    // Recovery alone, then a checkpoint before the open finishes the
    // commit, as a page cleaner may take one.
    let (e, record) = the_engine_after_a_crash_in_a_commit(dir.path(), &fs);
    let (rep, unfinished) = crate::redo::recovery::recover(&e.log, &e.pool, &e.metrics, 0).unwrap();
    assert!(rep.page_records_applied > 0, "{rep}");
    assert_eq!(
        unfinished.iter().map(|u| u.lsn).collect::<Vec<_>>(),
        [record]
    );
    e.log.begin_epoch().unwrap();
    e.flush_and_checkpoint().unwrap();
    assert!(
        e.log.checkpoint_lsn() <= record,
        "the checkpoint ({}) passed the record ({record}) of a commit recovery handed up \
         unfinished",
        e.log.checkpoint_lsn()
    );
    fs.crash(CrashMode::DropUnsynced);
    e.release_dir_lock();
    drop(e);

    let db = open(dir.path(), &fs);
    let (t, u) = (db.table("t").unwrap(), db.table("u").unwrap());
    let rows = (t.get(b"k").unwrap(), u.get(b"k").unwrap());
    // Its record is keys only: the open rolls it back (`txn::commit`,
    // "Rolling back a commit a crash cut short").
    assert_eq!(
        rows,
        (Some(b"old".to_vec()), Some(b"old".to_vec())),
        "after recovery the commit recovery had handed up is not rolled back whole"
    );
    t.check().unwrap();
    u.check().unwrap();
}

/// A rollback is a compensating commit, logged whole, then the rolled
/// back commit's own marker. A crash between the two (the compensation
/// durable, the marker not) leaves the rolled back commit unfinished: the
/// next open finds no row carrying it any more (the compensation replaced
/// them), so it compensates nothing and ends it. The rows are the old
/// ones, and every version chain is sound.
#[test]
fn a_crash_between_a_rollbacks_compensation_and_its_marker_rolls_back_once() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    // The open's steps by hand, to hold the rollback after its
    // compensation.
    let (e, record) = the_engine_after_a_crash_in_a_commit(dir.path(), &fs);
    let e = Arc::new(e);
    let (_, mut unfinished) =
        crate::redo::recovery::recover(&e.log, &e.pool, &e.metrics, 0).unwrap();
    e.log.begin_epoch().unwrap();
    assert_eq!(unfinished.len(), 1);
    let u0 = unfinished.remove(0);
    assert_eq!(u0.lsn, record);
    assert!(!crate::txn::record::decode(&u0.record).unwrap().values);
    let catalog = Arc::new(crate::catalog::Catalog::open(&e));
    let trx = Arc::new(crate::txn::TrxSys::open(e.clone(), catalog).unwrap());
    let hold = e.failpoints.arm("rollback.compensated");
    let rolling = {
        let trx = trx.clone();
        std::thread::spawn(move || crate::txn::roll_back_unfinished(&trx, u0.lsn, u0.record))
    };
    assert!(hold.wait_held(std::time::Duration::from_secs(10)));
    // The compensation waited for its own durability; the marker of the
    // commit it compensates is not appended yet.
    fs.crash(CrashMode::DropUnsynced);
    hold.release();
    // The marker is appended to a log that can no longer be written.
    let _ = rolling.join().unwrap();
    trx.stop_purge();
    drop(trx);
    e.release_dir_lock();
    drop(e);

    let finished = |db: &Db| {
        let m = &db.inner.engine.metrics;
        let get = |g: &std::sync::atomic::AtomicU64| g.load(std::sync::atomic::Ordering::Relaxed);
        (
            get(&m.recovery_txns_reapplied),
            get(&m.recovery_txns_rolled_back),
        )
    };
    let db = open(dir.path(), &fs);
    // The compensation was finished; the commit it compensates is rolled
    // back again, which finds nothing to change.
    assert_eq!(finished(&db), (0, 1));
    let (t, u) = (db.table("t").unwrap(), db.table("u").unwrap());
    assert_eq!(
        (t.get(b"k").unwrap(), u.get(b"k").unwrap()),
        (Some(b"old".to_vec()), Some(b"old".to_vec()))
    );
    t.check().unwrap();
    u.check().unwrap();
    db.check().unwrap();
    // Nothing left to finish: the next open recovers nothing unfinished.
    drop((t, u));
    db.simulate_crash();
    let db = open(dir.path(), &fs);
    assert_eq!(finished(&db), (0, 0));
    db.check().unwrap();
}

/// The other side of the rule above: a finished commit's pin is released
/// by a sync of the log, and a checkpoint held back by it makes that sync
/// itself instead of waiting for the next one (about a second at
/// `flush_log_at_trx_commit = 0` when no page is written).
#[test]
fn a_checkpoint_held_by_a_finished_commits_marker_syncs_the_log_and_passes_it() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    let db = open(dir.path(), &fs);
    let t = db.create_table("t").unwrap();
    db.flush().unwrap();
    db.set_option("flush_log_at_trx_commit", "0").unwrap();
    let log = db.inner.engine.log.clone();
    let record = log.lsn();
    t.put(b"k", b"v").unwrap();
    let end = log.lsn();
    db.inner.engine.checkpoint().unwrap();
    assert!(
        log.flushed_lsn() >= end,
        "the checkpoint did not sync the finished commit's marker"
    );
    assert!(
        log.checkpoint_lsn() > record,
        "the checkpoint ({}) stayed at the record ({record}) of a finished commit",
        log.checkpoint_lsn()
    );
}
