#![allow(clippy::unwrap_used)]
//! Power loss on an in-memory device: bank transfers run on 4 threads with
//! `flush_log_at_trx_commit = 1`; at a random moment the device loses every
//! write not yet synced (all of them, a random subset, or a random subset of
//! 4 KiB sectors: torn 16 KiB pages). After recovery the total balance is
//! unchanged and every acknowledged transfer is present.

mod common;

use common::bank::{opts, setup, transfer, verify};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel::io::faulty::{CrashMode, FaultyFs};
use keel::Db;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn crash_cycles(mode: impl Fn(u64) -> CrashMode, cycles: u64, test: &str) {
    let seed = common::seed(test);
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    let db = Db::open_with_fs(dir.path(), opts(), Some(fs.clone())).unwrap();
    setup(&db);
    db.flush().unwrap();
    let mut db = Some(db);
    let acked = Arc::new(Mutex::new(Vec::new()));
    let mut rng = SmallRng::seed_from_u64(seed);
    let (mut replayed, mut torn) = (0, 0);
    for cycle in 0..cycles {
        let d = db.take().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let handles: Vec<_> = (0..4u64)
            .map(|t| {
                let (d, stop, acked) = (d.clone(), stop.clone(), acked.clone());
                let mut rng = SmallRng::seed_from_u64(seed ^ (cycle << 8) ^ t);
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Acquire) {
                        let id = (cycle << 32) | (t << 24) | n;
                        match transfer(&d, &mut rng, id) {
                            Ok(true) => {
                                acked.lock().unwrap().push(id);
                                n += 1;
                            }
                            Ok(false) => {}
                            Err(_) => break, // the device is gone
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(rng.gen_range(20..120)));
        // Everything acknowledged so far must survive; later acks raced the crash.
        let before = acked.lock().unwrap().len();
        fs.crash(mode(seed ^ cycle));
        stop.store(true, Ordering::Release);
        for h in handles {
            h.join().unwrap();
        }
        d.simulate_crash();
        let reopened = Db::open_with_fs(dir.path(), opts(), Some(fs.clone()))
            .unwrap_or_else(|e| panic!("{test}: seed {seed} cycle {cycle}: reopen failed: {e}"));
        let acked_now = acked.lock().unwrap()[..before].to_vec();
        verify(&reopened, &acked_now);
        let m = reopened.metrics();
        replayed += m.get("recovery_page_records_applied").unwrap();
        torn += m.get("recovery_torn_pages_repaired").unwrap();
        acked.lock().unwrap().truncate(before);
        db = Some(reopened);
    }
    let d = db.take().unwrap();
    let n = acked.lock().unwrap().len();
    eprintln!("{test}: {n} acknowledged transfers, {replayed} page records replayed, {torn} torn pages repaired");
    assert!(n > 20, "too few transfers ran");
    assert!(replayed > 0, "recovery never had work to do");
    d.close().unwrap();
}

#[test]
fn power_loss_drops_every_unsynced_write() {
    crash_cycles(
        |_| CrashMode::DropUnsynced,
        8,
        "power_loss_drops_every_unsynced_write",
    );
}

#[test]
fn power_loss_keeps_a_random_subset_of_unsynced_writes() {
    crash_cycles(
        |seed| CrashMode::Random { seed },
        8,
        "power_loss_keeps_a_random_subset",
    );
}

#[test]
fn power_loss_tears_pages_at_4k_and_doublewrite_repairs_them() {
    crash_cycles(|seed| CrashMode::Torn { seed }, 8, "power_loss_tears_pages");
}
