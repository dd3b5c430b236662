#![allow(clippy::unwrap_used)]
//! Hot backup (`Db::backup`):
//!
//! - under concurrent bank transfers, with a log small enough that the
//!   writers lap it several times while the backup runs (the backup held
//!   at failpoint `backup.copying` meanwhile, so the redo copier must keep
//!   the pin moving): the copy opens, its total balance holds, every
//!   transfer acknowledged before the backup began is in it, and every
//!   tree checks;
//! - with the redo copier held (failpoint `backup.redo`), the checkpoint
//!   stays where the backup pinned it while the writers fill the log: they
//!   wait for log space rather than overwrite redo not yet copied;
//! - an idle database's copy holds its rows; a read-only open backs up too;
//! - a destination that is not empty or inside the database's directory,
//!   and a second backup at once, are refused with `Error::Backup`;
//! - a backup that meets a corrupt page fails naming it, and leaves no
//!   trace in its destination.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::bank::Bank;
use keel::{Db, Error, Options};
use rand::rngs::SmallRng;
use rand::SeedableRng;

const BANK: Bank = Bank {
    accounts: 600,
    pad: 400,
};

fn opts() -> Options {
    Options {
        flush_log_at_trx_commit: 2,
        ..common::bank::opts()
    }
}

#[test]
fn a_backup_under_transfers_opens_consistent_with_every_acknowledged_transfer() {
    let src = tempfile::tempdir().unwrap();
    let dest = tempfile::tempdir().unwrap();
    let copy = dest.path().join("copy");
    let db = Db::open(src.path(), opts()).unwrap();
    BANK.setup(&db);

    let stop = Arc::new(AtomicBool::new(false));
    let next_id = Arc::new(AtomicU64::new(1));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..3)
        .map(|w| {
            let (db, stop, next_id, acked) =
                (db.clone(), stop.clone(), next_id.clone(), acked.clone());
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(common::seed("hot_backup") + w);
                while !stop.load(Ordering::Relaxed) {
                    let id = next_id.fetch_add(1, Ordering::Relaxed);
                    if BANK.transfer(&db, &mut rng, id).unwrap() {
                        acked.lock().unwrap().push(id);
                    }
                }
            })
        })
        .collect();
    while acked.lock().unwrap().len() < 200 {
        std::thread::sleep(Duration::from_millis(5));
    }

    // Held after the pin, before the pages: the writers lap the log
    // meanwhile, which only the copier moving the pin allows.
    let hold = db.failpoint("backup.copying");
    let acked_before: Vec<u64> = acked.lock().unwrap().clone();
    // Every transfer acknowledged so far must be in the copy: make them
    // durable (flush_log_at_trx_commit is 2).
    db.flush_log().unwrap();
    let backup = {
        let (db, copy) = (db.clone(), copy.clone());
        std::thread::spawn(move || db.backup(&copy))
    };
    assert!(hold.wait_held(Duration::from_secs(20)));
    let lsn0 = db.metrics().get("log_lsn_current").unwrap();
    let cap = db.metrics().get("log_capacity").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while db.metrics().get("log_lsn_current").unwrap() < lsn0 + 2 * cap {
        assert!(
            std::time::Instant::now() < deadline,
            "the writers did not lap the log while the backup was held: the pin holds them?"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // A second backup meanwhile is refused.
    let other = dest.path().join("other");
    match db.backup(&other) {
        Err(Error::Backup(why)) => assert!(why.contains("another backup"), "{why}"),
        r => panic!("a second backup at once: {r:?}"),
    }
    hold.release();
    let rep = backup.join().unwrap().unwrap();
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    assert!(rep.end_lsn - rep.start_lsn > 2 * cap, "{rep}");
    assert!(rep.to_string().contains("opening it recovers it"), "{rep}");
    db.close().unwrap();

    let copy_db = Db::open(&copy, opts()).unwrap();
    BANK.audit(&copy_db, &acked_before).unwrap();
    copy_db.close().unwrap();
    // And the source, after all that, too.
    let db = Db::open(src.path(), opts()).unwrap();
    BANK.audit(&db, &acked.lock().unwrap()).unwrap();
}

#[test]
fn a_held_redo_copier_holds_the_checkpoint_and_the_copy_is_whole() {
    let src = tempfile::tempdir().unwrap();
    let dest = tempfile::tempdir().unwrap();
    let copy = dest.path().join("copy");
    let db = Db::open(src.path(), opts()).unwrap();
    BANK.setup(&db);
    db.flush().unwrap();
    let hold = db.failpoint("backup.redo");
    let backup = {
        let (db, copy) = (db.clone(), copy.clone());
        std::thread::spawn(move || db.backup(&copy))
    };
    assert!(hold.wait_held(Duration::from_secs(20)));
    let m = |k: &str| db.metrics().get(k).unwrap();
    let pinned = m("log_lsn_last_checkpoint");
    let cap = m("log_capacity");
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let writer = {
        let (db, stop, acked) = (db.clone(), stop.clone(), acked.clone());
        std::thread::spawn(move || {
            let mut rng = SmallRng::seed_from_u64(common::seed("hot_backup_held"));
            let mut id = 0;
            while !stop.load(Ordering::Relaxed) {
                id += 1;
                if BANK.transfer(&db, &mut rng, id).unwrap() {
                    acked.lock().unwrap().push(id);
                }
            }
        })
    };
    // The writers fill most of the log: without the pin the cleaners
    // would have moved the checkpoint long before.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while m("log_lsn_current") < pinned + cap / 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the writers stopped early"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        m("log_lsn_last_checkpoint"),
        pinned,
        "the checkpoint passed the pin"
    );
    assert!(
        m("log_lsn_current") < pinned + cap,
        "the writers overwrote uncopied redo"
    );
    hold.release();
    let rep = backup.join().unwrap().unwrap();
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert_eq!(rep.start_lsn, pinned);
    db.close().unwrap();
    let copy_db = Db::open(&copy, opts()).unwrap();
    BANK.audit(&copy_db, &[]).unwrap();
}

#[test]
fn an_idle_database_and_a_read_only_open_back_up_whole() {
    let src = tempfile::tempdir().unwrap();
    let dest = tempfile::tempdir().unwrap();
    let db = Db::open(src.path(), opts()).unwrap();
    let t = db.create_table("t").unwrap();
    for i in 0..3000u32 {
        t.put(&i.to_be_bytes(), &[i as u8; 100]).unwrap();
    }
    let rep = db.backup(dest.path().join("a")).unwrap();
    assert!(rep.pages > 20, "{rep}");
    // The destination must be new or empty.
    std::fs::write(dest.path().join("full"), b"x").unwrap();
    match db.backup(dest.path()) {
        Err(Error::Backup(why)) => assert!(why.contains("not empty"), "{why}"),
        r => panic!("a backup into a directory with a file: {r:?}"),
    }
    drop(t);
    db.close().unwrap();

    let ro = Db::open_read_only(src.path(), opts()).unwrap();
    ro.backup(dest.path().join("b")).unwrap();
    drop(ro);
    for d in ["a", "b"] {
        let copy = Db::open(dest.path().join(d), opts()).unwrap();
        let t = copy.table("t").unwrap();
        assert_eq!(t.range(..).unwrap().count(), 3000, "{d}");
        assert_eq!(t.get(&7u32.to_be_bytes()).unwrap().unwrap(), vec![7u8; 100]);
        copy.check().unwrap();
    }
}

#[test]
fn a_backup_that_fails_leaves_nothing_and_one_inside_the_source_is_refused() {
    let src = tempfile::tempdir().unwrap();
    let dest = tempfile::tempdir().unwrap();
    let db = Db::open(src.path(), opts()).unwrap();
    let t = db.create_table("t").unwrap();
    for i in 0..3000u32 {
        t.put(&i.to_be_bytes(), &[i as u8; 100]).unwrap();
    }
    match db.backup(src.path().join("sub").join("copy")) {
        Err(Error::Backup(why)) => assert!(why.contains("inside the database directory"), "{why}"),
        r => panic!("a backup inside the source: {r:?}"),
    }
    assert!(!src.path().join("sub").exists());
    drop(t);
    db.close().unwrap();

    // Page 5 (in use: the rows fill about 25 pages) made garbage.
    let ps = opts().page_size as u64;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(src.path().join("data-0.keel"))
        .unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &vec![0xa5; 512], 6 * ps + 100).unwrap();
    drop(f);
    let ro = Db::open_read_only(src.path(), opts()).unwrap();
    let copy = dest.path().join("copy");
    match ro.backup(&copy) {
        Err(e @ Error::CorruptPage { .. }) => {
            assert!(e.to_string().contains("during a backup"), "{e}")
        }
        r => panic!("a backup of a corrupt page: {r:?}"),
    }
    assert!(!copy.exists(), "the failed backup left {copy:?}");
    // Into a directory that existed: emptied, kept.
    ro.backup(dest.path()).unwrap_err();
    assert_eq!(std::fs::read_dir(dest.path()).unwrap().count(), 0);
}
